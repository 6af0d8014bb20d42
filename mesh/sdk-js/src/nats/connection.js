// One connection to one server: the handshake and the protocol's own
// chatter (seed 002, "The handshake, and where TLS goes", "The
// protocol's own chatter", "Writing is serialised"). It ends once, with
// one cause; reconnection (link.js) is a new Connection.

import { Parser } from './parser.js';
import { ProtocolError } from './errors.js';

const CRLF = '\r\n';

// MAX_BATCH bounds one transport write of coalesced commands.
const MAX_BATCH = 256 * 1024;

// The -ERR the server leaves the connection open after (seed 002, "The
// server's -ERR, as its table says"); every other one is followed by the
// server closing the socket.
const RECOVERABLE = [/^invalid subject/i, /^permissions violation/i];

export function isRecoverable(message) {
  return RECOVERABLE.some((re) => re.test(message));
}

// ServerError is a -ERR the server ended the session with, or refused the
// handshake with ("Authorization Violation").
export class ServerError extends Error {
  constructor(message) {
    super(message);
    this.name = 'ServerError';
  }
}

export class Connection {
  #t;
  #parser;
  #queue = []; // the bytes of the writes not yet begun, in order
  #queued = []; // their waiters, { resolve, reject }, one per entry of #queue
  #writing = null; // the drain of #queue while it runs: every write goes through it
  #abort = null; // fails the transport write in progress, at the end
  #pongs = []; // the waiters of the PINGs sent, in order: a PONG settles the oldest; { ok, fail }
  #closed = null; // the cause, once closed
  #onClosed = [];
  #opts;
  #keepalive = null; // the timer of the next keepalive PING
  #heard = 0; // when the server last sent anything
  #unanswered = 0; // keepalive PINGs without their PONG
  info = null;

  // connect runs the handshake over transport t: the server's INFO; the
  // TLS upgrade where the server requires it or the options ask for it,
  // before anything is written; CONNECT and PING; up at the matching
  // PONG. A second INFO (connect_info) is taken; a -ERR fails it with the
  // server's words.
  static async connect(t, opts = {}) {
    const c = new Connection(t, opts);
    await c.#handshake();
    c.#heard = Date.now();
    c.#readLoop();
    c.#keepAlive();
    return c;
  }

  constructor(t, opts) {
    this.#t = t;
    this.#opts = opts;
    this.#parser = new Parser({ maxPayload: opts.maxPayload });
  }

  get closed() {
    return this.#closed;
  }

  // onClosed registers fn, called once with the cause when the
  // connection ends.
  onClosed(fn) {
    if (this.#closed) fn(this.#closed);
    else this.#onClosed.push(fn);
  }

  async #handshake() {
    const timeout = this.#opts.handshakeTimeoutMs ?? 5000;
    const timer = setTimeout(() => this.#t.close(), timeout);
    try {
      const first = await this.#command();
      if (first.op !== 'INFO') throw new ProtocolError(`the server began with ${first.op}, not INFO`);
      this.info = first.info;
      // opts.tls is how to upgrade; tlsAlways (by default: whether tls is
      // given) whether to when the server does not require it.
      const always = this.#opts.tlsAlways ?? this.#opts.tls !== undefined;
      if (first.info.tls_required || always) {
        // Between INFO and CONNECT, where NATS puts it: CONNECT is never
        // written in the clear to a server that wants TLS.
        await this.#t.upgrade(this.#opts.tls ?? {});
      }
      await this.#t.write(Buffer.from(`CONNECT ${JSON.stringify(this.#connectOptions())}${CRLF}PING${CRLF}`));
      for (;;) {
        const c = await this.#command();
        switch (c.op) {
          case 'PONG':
            return;
          case 'INFO':
            this.info = c.info;
            continue;
          case '+OK':
            continue;
          case '-ERR':
            throw new ServerError(c.message);
          case 'PING':
            await this.#t.write(Buffer.from(`PONG${CRLF}`));
            continue;
          default:
            throw new ProtocolError(`${c.op} before the handshake's PONG`);
        }
      }
    } catch (err) {
      this.#t.close();
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  #connectOptions() {
    const o = {
      verbose: false,
      pedantic: false,
      headers: true,
      no_responders: true,
      protocol: 1,
      lang: 'mesh-js',
      version: '0.0.0',
      echo: true,
    };
    if (this.#opts.user !== undefined) {
      o.user = this.#opts.user;
      o.pass = this.#opts.pass;
    }
    if (this.#opts.name) o.name = this.#opts.name;
    return o;
  }

  // #command reads until the parser holds a whole command.
  async #command() {
    for (;;) {
      const c = this.#parser.next();
      if (c !== null) return c;
      const chunk = await this.#t.read();
      if (chunk === null) throw new Error('the server closed the connection during the handshake');
      this.#parser.push(chunk);
    }
  }

  async #readLoop() {
    try {
      for (;;) {
        for (const c of this.#parser.commands()) this.#dispatch(c);
        const chunk = await this.#t.read();
        if (chunk === null) {
          this.#end(new Error('the connection was lost'));
          return;
        }
        this.#heard = Date.now();
        this.#parser.push(chunk);
      }
    } catch (err) {
      this.#end(err);
    }
  }

  // #keepAlive sends a PING after pingIntervalMs of silence from the
  // server, on an unreferenced timer (a script that has finished is not
  // kept alive by it); maxPingsOut of them unanswered end the connection
  // as stale, which a reconnect answers with a fresh one.
  #keepAlive() {
    const every = this.#opts.pingIntervalMs ?? 120000;
    const most = this.#opts.maxPingsOut ?? 2;
    if (every <= 0 || this.#closed) return;
    const wait = Math.max(0, this.#heard + every - Date.now());
    this.#keepalive = setTimeout(() => {
      if (this.#closed) return;
      if (Date.now() - this.#heard >= every) {
        if (this.#unanswered >= most) {
          this.#end(new ServerError(`stale connection: ${this.#unanswered} keepalive PINGs unanswered`));
          return;
        }
        this.#unanswered++;
        this.#pongs.push({ ok: () => (this.#unanswered = 0), fail: () => {} });
        this.write(`PING${CRLF}`).catch(() => {});
        this.#heard = Date.now(); // the next PING after another interval of silence
      }
      this.#keepAlive();
    }, wait);
    this.#keepalive.unref?.();
  }

  #dispatch(c) {
    switch (c.op) {
      case 'PING':
        this.write(`PONG${CRLF}`).catch(() => {});
        return;
      case 'PONG': {
        const w = this.#pongs.shift();
        if (w) w.ok();
        return;
      }
      case 'INFO':
        this.info = c.info;
        this.#opts.onInfo?.(c.info);
        return;
      case '-ERR':
        if (isRecoverable(c.message)) {
          this.#opts.onError?.(new ServerError(c.message));
          return;
        }
        this.#end(new ServerError(c.message));
        return;
      case 'MSG':
      case 'HMSG':
        this.#opts.onMessage?.(c);
        return;
    }
  }

  // write queues bytes behind every write before it: a command of
  // several writes never interleaves with another. A write that fails
  // ends the connection: the bytes after it would follow a gap.
  write(bytes) {
    if (this.#closed) return Promise.reject(this.#closed);
    const data = typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : bytes;
    return new Promise((resolve, reject) => {
      this.#queue.push(data);
      this.#queued.push({ resolve, reject });
      this.#writing ??= this.#drain();
    });
  }

  // #drain writes what is queued, in order, the writes queued meanwhile
  // coalesced into one transport write of up to MAX_BATCH bytes: one
  // syscall and one TLS record for a burst of publishes rather than one
  // each (measured: 57 k publishes/s one record each, docs/benchmarks.md).
  // Each write's promise settles once its bytes are written.
  async #drain() {
    try {
      while (this.#queue.length > 0) {
        const bufs = this.#queue;
        const waiters = this.#queued;
        this.#queue = [];
        this.#queued = [];
        let i = 0;
        try {
          while (i < bufs.length) {
            let j = i;
            let size = 0;
            while (j < bufs.length && (j === i || size + bufs[j].length <= MAX_BATCH)) size += bufs[j++].length;
            if (this.#closed) throw this.#closed;
            await this.#write(j - i === 1 ? bufs[i] : Buffer.concat(bufs.slice(i, j), size));
            for (let k = i; k < j; k++) waiters[k].resolve();
            i = j;
          }
        } catch (err) {
          if (!this.#closed) this.#end(new Error(`the connection was lost: ${err.message}`));
          for (let k = i; k < waiters.length; k++) waiters[k].reject(this.#closed);
        }
      }
    } finally {
      this.#writing = null;
    }
  }

  // #write is one transport write, failed by the end (close() after its
  // flush period) rather than left to hang behind a server that stopped
  // reading.
  #write(chunk) {
    return new Promise((resolve, reject) => {
      this.#abort = reject;
      this.#t.write(chunk).then(resolve, reject);
    }).finally(() => {
      this.#abort = null;
    });
  }

  // flush is a round trip: a PING, settled by its PONG (matched in order).
  // One that times out keeps its place, so its PONG, when it comes, does
  // not settle the next flush a round trip early. The connection's end
  // fails every flush still waiting, with its cause.
  flush(timeoutMs = 5000) {
    return new Promise((resolve, reject) => {
      let settled = false;
      const fail = (err) => {
        clearTimeout(timer);
        if (!settled) {
          settled = true;
          reject(err);
        }
      };
      const timer = setTimeout(() => fail(new Error(`flush: no PONG within ${timeoutMs} ms`)), timeoutMs);
      if (this.#closed) return fail(this.#closed);
      this.#pongs.push({
        ok: () => {
          clearTimeout(timer);
          settled = true;
          resolve();
        },
        fail,
      });
      this.write(`PING${CRLF}`).catch(fail);
    });
  }

  #end(cause) {
    if (this.#closed) return;
    this.#closed = cause;
    clearTimeout(this.#keepalive);
    this.#abort?.(cause);
    this.#queue = [];
    for (const w of this.#queued.splice(0)) w.reject(cause);
    this.#t.close();
    for (const w of this.#pongs.splice(0)) w.fail(cause);
    for (const fn of this.#onClosed.splice(0)) fn(cause);
  }

  // close gives what is queued up to flushMs to be written (core NATS has
  // no goodbye: what is still queued is all the server will ever get),
  // then ends the connection.
  async close(flushMs = 5000) {
    if (this.#closed) return;
    if (this.#writing) await Promise.race([this.#writing, new Promise((r) => setTimeout(r, flushMs).unref?.())]);
    this.#end(new Error('closed'));
  }
}
