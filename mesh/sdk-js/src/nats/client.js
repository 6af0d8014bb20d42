// The client over one connection: publish, subscribe, request (seed 002,
// "Request/reply, without a reply queue", "Close flushes; a slow consumer
// is bounded"). Reconnection through the server pool is the next layer.

import { randomBytes } from 'node:crypto';

import { Connection, ServerError } from './connection.js';
import { Pool } from './servers.js';
import { dial } from './socket.js';
import { encodeHeaders } from './headers.js';

const CRLF = '\r\n';

// The Go, Java and C clients' default cap of one subscription's pending
// messages (seed 002); past it a message is dropped and counted.
export const DEFAULT_PENDING_MESSAGES = 524288;
export const DEFAULT_PENDING_BYTES = 64 * 1024 * 1024;

export class NoRespondersError extends Error {
  constructor(subject) {
    super(`no responders on ${subject}`);
    this.name = 'NoRespondersError';
  }
}

export class TimeoutError extends Error {
  constructor(what, ms) {
    super(`${what}: no answer within ${ms} ms`);
    this.name = 'TimeoutError';
  }
}

export class Client {
  #conn;
  #subs = new Map(); // sid -> subscription
  #nextSid = 1;
  #inbox;
  #onError;
  #onStatus;
  #closed;
  #resolveClosed;

  // connect dials the servers of opts.servers in order until one
  // completes the handshake, and rejects with the last one's failure when
  // none does. inboxPrefix is the credential's own (never bare _INBOX: the
  // mesh grants nobody that). TLS: a tls:// URL or the tls option means
  // TLS on every server; tls.servername defaults to the first server's
  // host, the name originally dialled, and is checked on every server.
  static async connect(opts = {}) {
    if (!opts.inboxPrefix || !/^_INBOX\.[^\s*>]+$/.test(opts.inboxPrefix)) {
      throw new TypeError(`inboxPrefix ${JSON.stringify(opts.inboxPrefix)}: the credential's own prefix under _INBOX., without wildcards`);
    }
    const pool = new Pool(opts.servers);
    const dialer = opts.dial ?? dial;
    const useTls = pool.tls || opts.tls !== undefined;
    const tlsOptions = { ...opts.tls, servername: opts.tls?.servername ?? pool.first.host };
    const c = new Client(opts);
    let last;
    for (const s of pool.servers) {
      try {
        const t = await dialer(s.host, s.port);
        c.#conn = await Connection.connect(t, {
          ...opts,
          tls: tlsOptions,
          tlsAlways: useTls,
          onMessage: (m) => c.#deliver(m),
          onError: (e) => c.#serverError(e),
        });
        c.#conn.onClosed((cause) => c.#ended(cause, s));
        return c;
      } catch (err) {
        last = err;
      }
    }
    throw last;
  }

  // closed settles, with the cause, once the client is closed for good.
  get closed() {
    return this.#closed;
  }

  #ended(cause, s) {
    this.#onStatus({ kind: 'closed', server: s.url, cause });
    this.#resolveClosed(cause);
  }

  constructor(opts) {
    this.#closed = new Promise((r) => (this.#resolveClosed = r));
    this.#onStatus = opts.onStatus ?? (() => {});
    this.#inbox = opts.inboxPrefix;
    this.#onError = opts.onError ?? (() => {});
    this.pendingMessages = opts.pendingMessages ?? DEFAULT_PENDING_MESSAGES;
    this.pendingBytes = opts.pendingBytes ?? DEFAULT_PENDING_BYTES;
  }

  get connection() {
    return this.#conn;
  }

  // publish sends data on subject, with a reply subject and headers when
  // given (HPUB).
  publish(subject, data = Buffer.alloc(0), { reply = '', headers } = {}) {
    checkSubject(subject);
    if (reply) checkSubject(reply);
    const body = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data);
    const r = reply ? ` ${reply}` : '';
    if (headers) {
      const h = encodeHeaders(headers);
      return this.#conn.write(Buffer.concat([Buffer.from(`HPUB ${subject}${r} ${h.length} ${h.length + body.length}${CRLF}`), h, body, Buffer.from(CRLF)]));
    }
    return this.#conn.write(Buffer.concat([Buffer.from(`PUB ${subject}${r} ${body.length}${CRLF}`), body, Buffer.from(CRLF)]));
  }

  // subscribe delivers every message on subject (in queue group queue, if
  // given) to onMessage, one at a time in arrival order, until
  // unsubscribed or max messages have come. A subscription whose handler
  // falls behind by more than the pending caps drops what comes, counts
  // it, and says so once per run of drops (onError).
  subscribe(subject, onMessage, { queue = '', max = 0 } = {}) {
    checkSubject(subject, true);
    const sid = String(this.#nextSid++);
    const sub = new Subscription(this, sid, subject, onMessage, max);
    this.#subs.set(sid, sub);
    const q = queue ? ` ${queue}` : '';
    this.#conn.write(`SUB ${subject}${q} ${sid}${CRLF}`).catch(() => {});
    if (max > 0) this.#conn.write(`UNSUB ${sid} ${max}${CRLF}`).catch(() => {});
    return sub;
  }

  unsubscribe(sub) {
    if (!this.#subs.delete(sub.sid)) return;
    this.#conn.write(`UNSUB ${sub.sid}${CRLF}`).catch(() => {});
  }

  // request publishes data on subject with a fresh inbox under the
  // credential's prefix as its reply, and resolves with the first answer.
  // A server that says nobody listens (a 503 on the inbox) is
  // NoRespondersError: a definite answer, not a timeout.
  request(subject, data, { headers, timeoutMs = 5000 } = {}) {
    const inbox = `${this.#inbox}.${randomBytes(12).toString('hex')}`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.unsubscribe(sub);
        reject(new TimeoutError(`request on ${subject}`, timeoutMs));
      }, timeoutMs);
      const sub = this.subscribe(
        inbox,
        (m) => {
          clearTimeout(timer);
          this.unsubscribe(sub);
          if (m.status === '503') reject(new NoRespondersError(subject));
          else resolve(m);
        },
        { max: 1 },
      );
      this.publish(subject, data, { reply: inbox, headers }).catch((err) => {
        clearTimeout(timer);
        this.unsubscribe(sub);
        reject(err);
      });
    });
  }

  flush(timeoutMs) {
    return this.#conn.flush(timeoutMs);
  }

  close(flushMs) {
    return this.#conn.close(flushMs);
  }

  #deliver(m) {
    const sub = this.#subs.get(m.sid);
    if (sub) sub.push(m);
  }

  // #serverError reports a -ERR the connection stays open after; a
  // refused subscription is dropped, so that no reconnect asks for it
  // again.
  #serverError(err) {
    const m = /^Permissions Violation for Subscription to "([^"]+)"/i.exec(err.message);
    if (m) {
      for (const [sid, sub] of this.#subs) {
        if (sub.subject === m[1]) {
          this.#subs.delete(sid);
          sub.refused = err;
        }
      }
    }
    this.#onError(err);
  }

  // slow is told by a subscription that it dropped its first message of
  // a run.
  slow(sub) {
    this.#onError(new ServerError(`slow consumer: subscription to ${sub.subject} is dropping messages (pending caps ${this.pendingMessages} messages, ${this.pendingBytes} bytes)`));
  }
}

// Subscription hands its messages to its handler one at a time, holding
// at most the client's pending caps.
export class Subscription {
  #queue = [];
  #bytes = 0;
  #running = false;
  #client;
  #handler;
  #left;
  dropped = 0;
  #dropping = false;
  refused = null;

  constructor(client, sid, subject, handler, max) {
    this.#client = client;
    this.sid = sid;
    this.subject = subject;
    this.#handler = handler;
    this.#left = max > 0 ? max : Infinity;
  }

  get pending() {
    return this.#queue.length;
  }

  push(m) {
    if (this.#left <= 0) return;
    this.#left--;
    if (this.#queue.length >= this.#client.pendingMessages || this.#bytes + m.data.length > this.#client.pendingBytes) {
      this.dropped++;
      if (!this.#dropping) {
        this.#dropping = true;
        this.#client.slow(this);
      }
      return;
    }
    this.#dropping = false;
    this.#queue.push(m);
    this.#bytes += m.data.length;
    if (!this.#running) this.#run();
  }

  async #run() {
    this.#running = true;
    while (this.#queue.length > 0) {
      const m = this.#queue.shift();
      this.#bytes -= m.data.length;
      try {
        await this.#handler(m);
      } catch {
        // A handler's failure is its own; the next message is delivered.
      }
    }
    this.#running = false;
  }

  unsubscribe() {
    this.#client.unsubscribe(this);
  }
}

function checkSubject(s, wildcards = false) {
  if (typeof s !== 'string' || s === '' || /[\s]/.test(s) || s.startsWith('.') || s.endsWith('.') || s.includes('..')) {
    throw new TypeError(`subject ${JSON.stringify(s)}: tokens of printable characters separated by dots`);
  }
  if (!wildcards && /(^|\.)[*>](\.|$)/.test(s)) {
    throw new TypeError(`subject ${JSON.stringify(s)}: a wildcard is for subscribing`);
  }
}

