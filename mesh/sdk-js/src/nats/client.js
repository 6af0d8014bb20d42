// The client: publish, subscribe, request (seed 002,
// "Request/reply, without a reply queue", "Close flushes; a slow consumer
// is bounded"), over the link to the bus (link.js), which survives the
// loss of a connection: subscriptions keep their sid across reconnects.

import { randomBytes } from 'node:crypto';

import { ServerError } from './connection.js';
import { Link } from './link.js';
import { encodeHeaders } from './headers.js';
import { MalformedMessageError } from './errors.js';

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
  #link;
  #subs = new Map(); // sid -> subscription
  #on = new Map(); // sid -> the connection its SUB was written on
  #nextSid = 1;
  #inbox;
  #onError;
  // malformed counts the messages whose header block was not NATS's
  // (MalformedMessageError): each was delivered flagged, or failed the
  // request it answered, and the connection stayed.
  malformed = 0;

  // connect dials the servers of opts.servers (nats:// or tls:// URLs,
  // first one first) in order until one completes the handshake, and
  // rejects with the last one's failure when none does; once up, a lost
  // connection is recovered through the pool (link.js says the policy).
  // inboxPrefix is the credential's own (never bare _INBOX: the mesh
  // grants nobody that). TLS: a tls:// URL or the tls option means TLS on
  // every server; tls.servername defaults to the first server's host, the
  // name originally dialled, and is checked on every server.
  static async connect(opts = {}) {
    if (!opts.inboxPrefix || !/^_INBOX\.[^\s*>]+$/.test(opts.inboxPrefix)) {
      throw new TypeError(`inboxPrefix ${JSON.stringify(opts.inboxPrefix)}: the credential's own prefix under _INBOX., without wildcards`);
    }
    const c = new Client(opts);
    const onStatus = opts.onStatus ?? (() => {});
    c.#link = new Link(opts, {
      onMessage: (m) => c.#deliver(m),
      onError: (e) => c.#serverError(e),
      onStatus,
      resubscribe: (conn) => c.#resubscribe(conn),
    });
    await c.#link.start();
    return c;
  }

  constructor(opts) {
    this.#inbox = opts.inboxPrefix;
    this.#onError = opts.onError ?? (() => {});
    this.pendingMessages = opts.pendingMessages ?? DEFAULT_PENDING_MESSAGES;
    this.pendingBytes = opts.pendingBytes ?? DEFAULT_PENDING_BYTES;
  }

  // closed settles, resolved with the cause, once the client is closed
  // for good: close(), a loss with reconnect off, the pool's attempts
  // spent, or a ProtocolError.
  get closed() {
    return this.#link.closed;
  }

  // connection is the connection of the moment (null before the first).
  get connection() {
    return this.#link.connection;
  }

  // publish sends data on subject, with a reply subject and headers when
  // given (HPUB). While the client reconnects it waits, and is written
  // after the subscriptions are back; past maxPendingWhileDownBytes of
  // such it is refused at once (PendingOverflowError, said through
  // onError too). The promise may be left unawaited: its failure is no
  // unhandled rejection.
  publish(subject, data = Buffer.alloc(0), { reply = '', headers } = {}) {
    return this.#publish(subject, data, { reply, headers });
  }

  #publish(subject, data, { reply = '', headers }, hold) {
    checkSubject(subject);
    if (reply) checkSubject(reply);
    const body = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data);
    const r = reply ? ` ${reply}` : '';
    let bytes;
    if (headers) {
      const h = encodeHeaders(headers);
      bytes = Buffer.concat([Buffer.from(`HPUB ${subject}${r} ${h.length} ${h.length + body.length}${CRLF}`), h, body, Buffer.from(CRLF)]);
    } else {
      bytes = Buffer.concat([Buffer.from(`PUB ${subject}${r} ${body.length}${CRLF}`), body, Buffer.from(CRLF)]);
    }
    const done = this.#link.write(bytes, { bounded: true, hold });
    done.catch(() => {});
    return done;
  }

  // subscribe delivers every message on subject (in queue group queue, if
  // given) to onMessage, one at a time in arrival order, until
  // unsubscribed or max messages have come. A subscription whose handler
  // falls behind by more than the pending caps drops what comes, counts
  // it, and says so once per run of drops (onError). It lives across
  // reconnects, under the same sid; made while down, its SUB is written
  // with the others when the client is back.
  subscribe(subject, onMessage, { queue = '', max = 0 } = {}) {
    checkSubject(subject, true);
    const refused = this.#link.refusal;
    if (refused) throw refused;
    const sid = String(this.#nextSid++);
    const sub = new Subscription(this, sid, subject, onMessage, max, queue);
    this.#subs.set(sid, sub);
    if (this.#link.up) {
      const conn = this.#link.connection;
      this.#on.set(sid, conn);
      conn.write(subLines(sub)).catch(() => {});
    }
    return sub;
  }

  unsubscribe(sub) {
    if (!this.#subs.delete(sub.sid)) return;
    const on = this.#on.get(sub.sid);
    this.#on.delete(sub.sid);
    // Only the connection that has it is told; a new one never had it.
    if (on && on === this.#link.connection && !on.closed) this.#link.write(`UNSUB ${sub.sid}${CRLF}`).catch(() => {});
  }

  // #resubscribe is the SUB lines of every subscription conn does not
  // have yet, under its original sid and queue, an auto-unsubscribe's
  // limit re-sent as what is left of it.
  #resubscribe(conn) {
    let lines = '';
    for (const [sid, sub] of this.#subs) {
      if (this.#on.get(sid) === conn) continue;
      this.#on.set(sid, conn);
      lines += subLines(sub);
    }
    return lines;
  }

  // spent is told by a subscription that its last message came: the
  // server has dropped it, and so does the client.
  spent(sub) {
    if (this.#subs.get(sub.sid) !== sub) return;
    this.#subs.delete(sub.sid);
    this.#on.delete(sub.sid);
  }

  // request publishes data on subject with a fresh inbox under the
  // credential's prefix as its reply, and resolves with the first answer.
  // A server that says nobody listens (a 503 on the inbox) is
  // NoRespondersError: a definite answer, not a timeout.
  request(subject, data, { headers, timeoutMs = 5000 } = {}) {
    const inbox = `${this.#inbox}.${randomBytes(12).toString('hex')}`;
    return new Promise((resolve, reject) => {
      let timer;
      // An inbox subscription lives across a reconnect like any other, so
      // a request in flight may still be answered after one.
      const sub = this.subscribe(
        inbox,
        (m) => {
          clearTimeout(timer);
          this.unsubscribe(sub);
          if (m.malformed) reject(new MalformedMessageError(`request on ${subject}: the answer's ${m.malformed.message}`));
          else if (m.status === '503') reject(new NoRespondersError(subject));
          else resolve(m);
        },
        { max: 1 },
      );
      // A request that times out while its PUB still waits for a
      // reconnect takes it back: nobody is asked to act for a caller who
      // has given up.
      const hold = {};
      timer = setTimeout(() => {
        hold.withdraw?.();
        this.unsubscribe(sub);
        reject(new TimeoutError(`request on ${subject}`, timeoutMs));
      }, timeoutMs);
      this.#publish(subject, data, { reply: inbox, headers }, hold).catch((err) => {
        clearTimeout(timer);
        this.unsubscribe(sub);
        reject(err);
      });
    });
  }

  flush(timeoutMs) {
    return this.#link.flush(timeoutMs);
  }

  close(flushMs) {
    return this.#link.close(flushMs);
  }

  #deliver(m) {
    if (m.malformed) this.malformed++;
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
          this.#on.delete(sid);
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
  #queue = new Fifo();
  #bytes = 0;
  #running = false;
  #client;
  #handler;
  #left;
  dropped = 0;
  #dropping = false;
  refused = null;

  constructor(client, sid, subject, handler, max, queue = '') {
    this.#client = client;
    this.sid = sid;
    this.subject = subject;
    this.queue = queue;
    this.max = max > 0 ? max : 0;
    this.#handler = handler;
    this.#left = max > 0 ? max : Infinity;
  }

  // left is how many messages an auto-unsubscribing subscription still
  // takes (Infinity without a max).
  get left() {
    return this.#left;
  }

  get pending() {
    return this.#queue.length;
  }

  push(m) {
    if (this.#left <= 0) return;
    this.#left--;
    if (this.#left === 0) this.#client.spent(this);
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

// Fifo is a queue whose shift is O(1): Array.prototype.shift copies the
// array, so a subscription draining 200 000 queued messages took 38 s,
// the event loop blocked meanwhile (docs/benchmarks.md).
class Fifo {
  #items = [];
  #head = 0;

  get length() {
    return this.#items.length - this.#head;
  }

  push(v) {
    this.#items.push(v);
  }

  shift() {
    if (this.#head >= this.#items.length) return undefined;
    const v = this.#items[this.#head];
    this.#items[this.#head++] = undefined;
    // Compacted once the taken half is the larger: amortised O(1).
    if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return v;
  }
}

function subLines(sub) {
  const q = sub.queue ? ` ${sub.queue}` : '';
  const unsub = sub.max > 0 ? `UNSUB ${sub.sid} ${sub.left}${CRLF}` : '';
  return `SUB ${sub.subject}${q} ${sub.sid}${CRLF}${unsub}`;
}

function checkSubject(s, wildcards = false) {
  if (typeof s !== 'string' || s === '' || /[\s]/.test(s) || s.startsWith('.') || s.endsWith('.') || s.includes('..')) {
    throw new TypeError(`subject ${JSON.stringify(s)}: tokens of printable characters separated by dots`);
  }
  if (!wildcards && /(^|\.)[*>](\.|$)/.test(s)) {
    throw new TypeError(`subject ${JSON.stringify(s)}: a wildcard is for subscribing`);
  }
}

