// The client's link to the bus across connections (seed 002,
// "Reconnection", "Writing is serialised, and a write can wait for a
// reconnect"). It holds the server pool and the connection of the
// moment; when that one is lost — the socket closed or failed, or a -ERR
// the server closes after, a Stale Connection among them — it dials the
// next server of the pool, runs the handshake again, has the client write
// its subscriptions again, and only then lets through the writes that
// waited meanwhile. A ProtocolError (bytes that are not NATS) is not
// recovered: it is latched, and every caller gets that one cause.
//
// The policy, in options:
//   reconnect (true)             false makes a lost connection the end
//   maxReconnectAttempts (-1)    failed attempts per server before it is
//                                dropped from the pool, -1 for no limit; a
//                                server's count starts again once connected
//                                to (as the Go client counts). The client
//                                ends once the pool is empty.
//   reconnectWaitMs (2000)       the least time between two attempts at the
//                                same server; another server of the pool is
//                                tried at once
//   reconnectJitterMs (100), reconnectJitterTlsMs (1000)
//                                a random spread added to each wait, the
//                                second when the client uses TLS (nats.js's
//                                defaults), so a restarted cluster's clients
//                                do not come back in lockstep
//   maxPendingWhileDownBytes (8 MiB, the Go client's ReconnectBufSize)
//                                the bound on the publishes waiting for a
//                                reconnect; past it a publish is refused at
//                                once (PendingOverflowError), 0 refuses
//                                every publish while down

import { Connection } from './connection.js';
import { ClosedError, PendingOverflowError, ProtocolError, ReconnectError } from './errors.js';
import { Pool } from './servers.js';
import { dial } from './socket.js';

export const DEFAULT_MAX_PENDING_WHILE_DOWN_BYTES = 8 * 1024 * 1024;

export class Link {
  #opts;
  #hooks;
  #pool;
  #dial;
  #connOpts;
  #conn = null; // the connection of the moment, up or resubscribing
  #server = null; // the pool's entry it was dialled at
  #up = false; // the connection takes writes: its resubscriptions are written
  #waiting = []; // writes and flushes made while not up, in order
  #waitingBytes = 0;
  #overflowSaid = false;
  #closing = null; // the ClosedError, once close() is called
  #cause = null; // the cause the link ended with, for good
  #wake = null; // ends a reconnect wait early
  #attempt = null; // the transport of an attempt under way
  #resolveClosed;
  closed;

  // hooks: onMessage(m), onError(err) (a -ERR the connection stays open
  // after, or a refusal worth saying), onStatus(event), and
  // resubscribe(conn) -> the SUB (and UNSUB) lines of every subscription
  // not yet on conn.
  constructor(opts, hooks) {
    this.#opts = opts;
    this.#hooks = hooks;
    this.#pool = new Pool(opts.servers);
    this.#dial = opts.dial ?? dial;
    this.tls = this.#pool.tls || opts.tls !== undefined;
    this.closed = new Promise((r) => (this.#resolveClosed = r));
    this.#connOpts = {
      ...opts,
      // The name checked is the one first dialled, on every server:
      // connect_urls are addresses, and a name the client never asked
      // for proves nothing.
      tls: { ...opts.tls, servername: opts.tls?.servername ?? this.#pool.first.host },
      tlsAlways: this.tls,
      onMessage: hooks.onMessage,
      onError: hooks.onError,
    };
  }

  get connection() {
    return this.#conn;
  }

  get up() {
    return this.#up;
  }

  get servers() {
    return this.#pool.servers.map((s) => s.url);
  }

  // start connects to the servers in order, each once, and rejects with
  // the last failure when none takes the connection (a ProtocolError at
  // once): reconnecting is for a client that has been up.
  async start() {
    let last;
    for (const s of this.#pool.servers) {
      try {
        const conn = await this.#open(s);
        await this.#install(conn, s);
        return;
      } catch (err) {
        last = err;
        if (err instanceof ProtocolError) break;
      }
    }
    this.#cause = last;
    this.#resolveClosed(last);
    throw last;
  }

  async #open(s) {
    s.attempts++;
    s.lastAttempt = Date.now();
    const t = await this.#dial(s.host, s.port);
    if (this.#closing) {
      t.close();
      throw this.#closing;
    }
    this.#attempt = t;
    try {
      return await Connection.connect(t, { ...this.#connOpts, onInfo: (info) => this.#learn(info, s) });
    } finally {
      this.#attempt = null;
    }
  }

  // #install makes conn the connection: the subscriptions are written
  // first, and once they are, what waited is let through behind them.
  async #install(conn, s) {
    if (this.#closing) {
      conn.close(0);
      throw this.#closing;
    }
    s.attempts = 0;
    this.#conn = conn;
    this.#server = s;
    conn.onClosed((cause) => this.#lost(conn, s, cause));
    this.#learn(conn.info, s);
    const subs = this.#hooks.resubscribe(conn);
    if (subs) {
      try {
        await conn.write(subs);
      } catch {
        return; // lost again: #lost has begun the next round
      }
    }
    if (conn.closed || this.#closing) return;
    // Subscriptions made while those were written; synchronously with
    // the release, so nothing comes between.
    const more = this.#hooks.resubscribe(conn);
    if (more) conn.write(more).catch(() => {});
    this.#up = true;
    this.#overflowSaid = false;
    const waiting = this.#waiting.splice(0);
    this.#waitingBytes = 0;
    for (const w of waiting) w.release(conn);
  }

  #learn(info, s) {
    if (!info) return;
    this.#pool.learn(info.connect_urls);
    if (info.ldm) this.#status({ kind: 'lameDuck', server: s.url });
  }

  #status(e) {
    try {
      this.#hooks.onStatus(e);
    } catch {
      // the listener's failure is its own
    }
  }

  #lost(conn, s, cause) {
    if (conn !== this.#conn || this.#closing || this.#cause) return;
    this.#up = false;
    this.#status({ kind: 'disconnected', server: s.url, cause });
    if (cause instanceof ProtocolError || !(this.#opts.reconnect ?? true)) {
      this.#finish(cause, s);
      return;
    }
    // A failure of the loop's own is the end, not an unhandled rejection.
    this.#reconnect(s, cause).catch((err) => this.#finish(err, s));
  }

  async #reconnect(from, cause) {
    const most = this.#opts.maxReconnectAttempts ?? -1;
    const wait = this.#opts.reconnectWaitMs ?? 2000;
    const jitter = this.tls ? (this.#opts.reconnectJitterTlsMs ?? 1000) : (this.#opts.reconnectJitterMs ?? 100);
    let last = cause;
    let s = this.#pool.after(from);
    for (;;) {
      if (this.#closing || this.#cause) return;
      if (most >= 0 && s.attempts >= most) {
        const next = this.#pool.size > 1 ? this.#pool.after(s) : null;
        this.#pool.remove(s);
        if (!next) {
          this.#finish(new ReconnectError(most, last), s);
          return;
        }
        s = next;
        continue;
      }
      const left = s.lastAttempt + wait + Math.random() * jitter - Date.now();
      if (left > 0) await this.#sleep(left);
      if (this.#closing) return;
      this.#status({ kind: 'reconnecting', server: s.url, cause: last });
      let conn;
      try {
        conn = await this.#open(s);
      } catch (err) {
        if (this.#closing) return;
        if (err instanceof ProtocolError) {
          this.#finish(err, s);
          return;
        }
        last = err;
        s = this.#pool.after(s);
        continue;
      }
      try {
        await this.#install(conn, s);
      } catch {
        return; // closed meanwhile
      }
      if (this.#up && this.#conn === conn) this.#status({ kind: 'reconnected', server: s.url });
      return;
    }
  }

  // #sleep waits ms on a referenced timer: a client that is reconnecting
  // is still the program's business (a module that only subscribes has
  // nothing else holding it), so the program does not exit under it.
  #sleep(ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = done;
    }).finally(() => (this.#wake = null));
  }

  #finish(cause, s) {
    if (this.#cause) return;
    this.#cause = cause;
    this.#up = false;
    this.#failWaiting(cause);
    this.#status({ kind: 'closed', server: s?.url ?? this.#server?.url, cause });
    this.#resolveClosed(cause);
  }

  #failWaiting(cause) {
    const waiting = this.#waiting.splice(0);
    this.#waitingBytes = 0;
    for (const w of waiting) w.fail(cause);
  }

  // refusal is why the link takes nothing more (the cause it ended with,
  // or close() called), or null.
  get refusal() {
    return this.#cause ?? this.#closing;
  }

  // write sends bytes on the connection, or, while it is down, holds them
  // until the next one has its subscriptions back (outside the
  // connection's write chain, so they cannot go ahead of those). A
  // publish (bounded) waiting counts towards maxPendingWhileDownBytes.
  // hold, if given, gets withdraw(): the write is dropped if it is still
  // waiting (its promise then never settles: its caller has moved on).
  write(bytes, { bounded = false, hold } = {}) {
    const refused = this.refusal;
    if (refused) return Promise.reject(refused);
    if (this.#up) return this.#conn.write(bytes);
    const size = bounded ? bytes.length : 0;
    const bound = this.#opts.maxPendingWhileDownBytes ?? DEFAULT_MAX_PENDING_WHILE_DOWN_BYTES;
    if (size > 0 && this.#waitingBytes + size > bound) {
      const err = new PendingOverflowError(size, this.#waitingBytes, bound);
      if (!this.#overflowSaid) {
        // Said once per time down: a publisher that does not await its
        // publishes learns of it all the same.
        this.#overflowSaid = true;
        this.#hooks.onError(err);
      }
      return Promise.reject(err);
    }
    return new Promise((resolve, reject) => {
      this.#waitingBytes += size;
      const w = {
        release: (conn) => conn.write(bytes).then(resolve, reject),
        fail: reject,
      };
      this.#waiting.push(w);
      if (hold) {
        hold.withdraw = () => {
          const i = this.#waiting.indexOf(w);
          if (i < 0) return;
          this.#waiting.splice(i, 1);
          this.#waitingBytes -= size;
        };
      }
    });
  }

  // flush is a round trip on the connection; made while down, it waits
  // in line with the writes, and timeoutMs covers the wait too.
  flush(timeoutMs = 5000) {
    const refused = this.refusal;
    if (refused) return Promise.reject(refused);
    if (this.#up) return this.#conn.flush(timeoutMs);
    return new Promise((resolve, reject) => {
      const deadline = Date.now() + timeoutMs;
      const w = {
        release: (conn) => {
          clearTimeout(timer);
          conn.flush(Math.max(1, deadline - Date.now())).then(resolve, reject);
        },
        fail: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      const timer = setTimeout(() => {
        const i = this.#waiting.indexOf(w);
        if (i >= 0) this.#waiting.splice(i, 1);
        reject(new Error(`flush: not reconnected within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#waiting.push(w);
    });
  }

  // close stops the reconnect loop, fails what waits for a reconnect that
  // is no longer coming, and gives the connection's queue up to flushMs
  // to be written before it is torn down.
  async close(flushMs = 5000) {
    if (this.#cause) return;
    if (this.#closing) return this.closed.then(() => {});
    const cause = new ClosedError();
    this.#closing = cause;
    this.#wake?.();
    this.#attempt?.close();
    this.#failWaiting(cause);
    this.#up = false;
    const conn = this.#conn;
    if (conn && !conn.closed) await conn.close(flushMs);
    this.#finish(cause);
  }
}
