// A module's connection to the mesh (design 19): the floor and events.
// This SDK claims those two capabilities and nothing more
// (conformance/registry.yaml); a module in JavaScript that serves or uses
// a tool is refused when it is built (mesh-build check).

import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';

import { Client, NoRespondersError, TimeoutError } from '../nats/client.js';
import { dial as socketDial } from '../nats/socket.js';
import { Puller, ACK, nak, term, deliveredCount } from './consumer.js';
import { parseCredential } from './credential.js';
import { BootstrapError, ClosedError, DeniedError, InvalidError, NoConsumerError } from './errors.js';
import * as wire from './wire.js';

export const DEFAULT_TIMEOUT_MS = 10000;

// SETTLE_WINDOW_MS: after a subscribe, a delivery no handler wants is held
// this long rather than acknowledged. A module subscribes pattern by
// pattern and its consumer delivers from the first: without the window, a
// backlog (what was emitted while the module restarted, exactly what the
// durable consumer keeps) would be acknowledged as unwanted before the
// module's second subscribe said it wants it.
export const SETTLE_WINDOW_MS = 2000;

// DEDUP_CAPACITY: how many handled events a module remembers, keyed by
// x-source and x-event-id together (only the pair names one event).
export const DEDUP_CAPACITY = 16384;

// DEFAULT_REDELIVERY_MS: the wait after an event's first failed delivery
// (connect's redeliveryMs replaces it), as the Go SDK's DefaultRedelivery.
export const DEFAULT_REDELIVERY_MS = 1000;

// redeliveryDelayMs: the wait after delivery n of an event failed, limit
// being the consumer's MaxDeliver (0: unknown): firstMs (1 s by default)
// doubling to 30 s, the last delivery given back at once
// (docs/events.md).
export function redeliveryDelayMs(n, limit, firstMs = DEFAULT_REDELIVERY_MS) {
  if (limit > 0 && n >= limit) return 0;
  const k = Math.min(Math.max(n, 1), 16);
  return Math.min(firstMs * 2 ** (k - 1), 30000);
}

// connect reads the credential (the file credentialPath, else the one
// $MESH_CREDENTIAL names, or the text credential), takes the module's
// identity from it — overwriting MESH_NODE and MESH_MODULE in env where
// they disagree — and connects to the bus over TLS pinned to the
// credential's fingerprint, the name checked being the host it names.
// redeliveryMs replaces DEFAULT_REDELIVERY_MS where above zero.
export async function connect({ credential, credentialPath, env = process.env, dial = socketDial, timeoutMs = DEFAULT_TIMEOUT_MS, redeliveryMs = DEFAULT_REDELIVERY_MS, log = () => {}, pull, client: clientOpts = {} } = {}) {
  let text = credential;
  if (text === undefined) {
    const path = credentialPath ?? env[wire.ENV_CREDENTIAL];
    if (!path) throw new InvalidError(`no credential: pass one, or name its file in ${wire.ENV_CREDENTIAL}`);
    text = await readFile(path, 'utf8');
  }
  const cred = parseCredential(text);
  if (cred.bootstrap) throw new BootstrapError();
  // Identity comes from the credential, never from the environment: a
  // variable anything on the machine can set must not decide which module
  // this is (design 19, "Identity").
  if (env[wire.ENV_NODE] !== cred.node) env[wire.ENV_NODE] = cred.node;
  if (env[wire.ENV_MODULE] !== cred.module) env[wire.ENV_MODULE] = cred.module;
  const m = new Module(cred, timeoutMs, log, pull, redeliveryMs > 0 ? redeliveryMs : DEFAULT_REDELIVERY_MS);
  m._client = await Client.connect({
    ...clientOpts,
    servers: [cred.server],
    dial,
    user: cred.user,
    pass: cred.pass,
    inboxPrefix: cred.inbox,
    tls: { fingerprint: cred.fingerprint, servername: cred.host },
    name: `${cred.node}/${cred.module}`,
    onError: (err) => m._serverError(err),
    onStatus: (s) => m._status(s),
  });
  return m;
}

export class Module {
  #cred;
  #timeoutMs;
  #log;
  #subs = [];
  #settleBy = 0;
  #held = [];
  #releaseTimer = null;
  #seen = new Map();
  #puller = null;
  #binding = null;
  #maxDeliver = 0;
  #redeliveryMs;
  #denials = new Map(); // subject -> [reject]
  #closed = false;
  #dispatching = Promise.resolve();
  refused = 0; // deliveries refused for good, for the module's own log
  _client = null;

  #pull;

  constructor(cred, timeoutMs, log, pull, redeliveryMs = DEFAULT_REDELIVERY_MS) {
    this.#pull = pull;
    this.#redeliveryMs = redeliveryMs;
    this.#cred = cred;
    this.#timeoutMs = timeoutMs;
    this.#log = log;
  }

  get node() {
    return this.#cred.node;
  }

  get name() {
    return this.#cred.module;
  }

  // publish emits the event key with body (JSON: bytes, a string, or a
  // value to stringify) on mesh.mod.<module>.event.<key>: the envelope as
  // headers, the body alone, the event id as Nats-Msg-Id, and resolves
  // with the id once the stream's PubAck says it is stored (a duplicate
  // the server recognised is stored too).
  async publish(key, body, { id = randomUUID(), time = new Date(), causation = '', schema = '', timeoutMs = this.#timeoutMs } = {}) {
    if (this.#closed) throw new ClosedError();
    const bad = wire.checkKey(key);
    if (bad) throw new InvalidError(`publish ${JSON.stringify(key)}: ${bad}`);
    const bytes = Buffer.isBuffer(body) || body instanceof Uint8Array ? Buffer.from(body) : typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(JSON.stringify(body) ?? '', 'utf8');
    if (!wire.isJSON(bytes)) throw new InvalidError(`publish ${key}: the body is not JSON (${bytes.length} bytes)`);
    const at = typeof time === 'string' ? time : wire.formatTime(time);
    const headers = new Map([
      [wire.HEADER_EVENT_ID, [id]],
      [wire.HEADER_SOURCE, [this.name]],
      [wire.HEADER_NODE, [this.node]],
      [wire.HEADER_TIME, [at]],
      [wire.HEADER_CONTENT_TYPE, [wire.CONTENT_TYPE_JSON]],
    ]);
    if (causation) headers.set(wire.HEADER_CAUSATION_ID, [causation]);
    if (schema) headers.set(wire.HEADER_SCHEMA, [schema]);
    try {
      wire.validateHeaders(headers);
    } catch (err) {
      throw new InvalidError(`publish ${key}: ${err.message}`);
    }
    headers.set(wire.HEADER_MSG_ID, [id]);
    const subject = wire.eventSubject(this.name, key);
    const answer = await this.#ask(subject, bytes, headers, timeoutMs, () => new Error(`publish ${key}: no stream stores ${subject}: the mesh has no EVENTS stream yet`));
    let ack;
    try {
      ack = JSON.parse(answer.data.toString('utf8'));
    } catch {
      throw new Error(`publish ${key}: the server's answer is not a PubAck: ${JSON.stringify(answer.data.toString('utf8').slice(0, 96))}`);
    }
    if (ack.error) throw new Error(`publish ${key}: the stream refused it: ${ack.error.description ?? JSON.stringify(ack.error)}`);
    if (!ack.stream) throw new Error(`publish ${key}: the server's answer is not a PubAck: ${JSON.stringify(answer.data.toString('utf8').slice(0, 96))}`);
    return id;
  }

  // subscribe runs handler(event) for every event whose "<module>.<key>"
  // matches pattern ("sensor.alarm.>"). The first binds the consumer the
  // mesh made for this module on this node (NoConsumerError if there is
  // none: nothing is created). A handler that throws or rejects gives the
  // event back to be delivered again later; handlers run one at a time.
  async subscribe(pattern, handler) {
    if (this.#closed) throw new ClosedError();
    if (typeof handler !== 'function') throw new InvalidError(`subscribe ${JSON.stringify(pattern)}: the handler is not a function`);
    const dot = typeof pattern === 'string' ? pattern.indexOf('.') : -1;
    if (dot < 0) throw new InvalidError(`subscribe ${JSON.stringify(pattern)}: want <module>.<key pattern>`);
    const bad = wire.checkName(pattern.slice(0, dot)) ?? wire.checkKeyPattern(pattern.slice(dot + 1));
    if (bad) throw new InvalidError(`subscribe ${JSON.stringify(pattern)}: ${bad}`);
    const sub = { pattern, handler };
    this.#subs.push(sub);
    this.#settleBy = Date.now() + SETTLE_WINDOW_MS;
    try {
      await this.#bind();
    } catch (err) {
      this.#subs.splice(this.#subs.indexOf(sub), 1);
      throw err;
    }
  }

  #bind() {
    this.#binding ??= this.#bindOnce().catch((err) => {
      this.#binding = null;
      throw err;
    });
    return this.#binding;
  }

  async #bindOnce() {
    const consumer = wire.moduleConsumer(this.node, this.name);
    const subject = wire.consumerInfo(wire.STREAM_EVENTS, consumer);
    let answer;
    try {
      answer = await this.#ask(subject, '', undefined, this.#timeoutMs, () => new NoConsumerError(consumer, 'the JetStream API did not answer'));
    } catch (err) {
      // Only a module whose manifest consumes something may read its
      // consumer's info; for any other the controller made none.
      if (err instanceof DeniedError) throw new NoConsumerError(consumer, err.message);
      throw err;
    }
    let info;
    try {
      info = JSON.parse(answer.data.toString('utf8'));
    } catch {
      throw new Error(`bind consumer ${consumer}: the answer is not JSON`);
    }
    if (info.error) {
      if (info.error.code === 404) throw new NoConsumerError(consumer, info.error.description ?? 'not found');
      throw new Error(`bind consumer ${consumer}: ${info.error.description ?? JSON.stringify(info.error)}`);
    }
    // The delivery limit, as the controller set it: the last delivery is
    // given back at once, so that the dead letter is not held up.
    this.#maxDeliver = Math.max(info.config?.max_deliver ?? 0, 0);
    this.#puller = new Puller(this._client, {
      stream: wire.STREAM_EVENTS,
      consumer,
      inboxPrefix: this.#cred.inbox,
      deliver: (m) => this.#dispatch(m),
      onTrouble: (err) => this.#log('warn', 'consuming', { consumer, err: err.message }),
      pull: this.#pull,
    });
    this.#puller.start();
  }

  // #ask is a request whose refusal by the server (a permissions -ERR,
  // heard apart from the request) is its answer, not a timeout.
  #ask(subject, data, headers, timeoutMs, noResponders) {
    return new Promise((resolve, reject) => {
      const waiting = this.#denials.get(subject) ?? [];
      const denied = (err) => reject(new DeniedError(err.message));
      waiting.push(denied);
      this.#denials.set(subject, waiting);
      const done = () => {
        const w = this.#denials.get(subject) ?? [];
        w.splice(w.indexOf(denied), 1);
        if (w.length === 0) this.#denials.delete(subject);
      };
      this._client.request(subject, data, { headers, timeoutMs }).then(
        (m) => {
          done();
          resolve(m);
        },
        (err) => {
          done();
          reject(err instanceof NoRespondersError ? noResponders() : err);
        },
      );
    });
  }

  _serverError(err) {
    const m = /^Permissions Violation for (?:Publish|Subscription) to "([^"]+)"/i.exec(err.message);
    const waiting = m && this.#denials.get(m[1]);
    if (waiting) {
      for (const reject of waiting.splice(0)) reject(err);
      return;
    }
    this.#log('error', 'the server refused', { err: err.message });
  }

  _status(s) {
    this.#log('info', `bus ${s.kind}`, { server: s.server, cause: s.cause?.message });
    if (s.kind === 'reconnected') this.#puller?.restart();
  }

  // #dispatch decides what becomes of one delivery: refuse it for good,
  // hold it, ack it unwanted, ack a duplicate, or run the matching
  // handlers and ack or nak by their outcome. Deliveries come one at a
  // time (the pull's subscription awaits each).
  async #dispatch(m) {
    const run = this.#dispatching.then(() => this.#handle(m));
    this.#dispatching = run.catch(() => {});
    return run;
  }

  async #handle(m) {
    // A settlement is written in order behind the ones before it, and not
    // waited for: the next delivery is handled while it is on its way
    // (close() flushes what is queued).
    const settle = (how) => {
      this._client.publish(m.reply, how).catch((err) => this.#log('error', 'settle delivery', { how, err: err.message }));
    };
    let event;
    try {
      event = decode(m);
    } catch (err) {
      this.refused++;
      this.#log('error', 'envelope refused', { subject: m.subject, part: err.part ?? 'envelope', refusals: this.refused, err: err.message });
      return settle(term(wire.refusalReason(err)));
    }
    const handlers = this.#subs.filter((s) => wire.matchKey(s.pattern, event.key)).map((s) => s.handler);
    if (handlers.length === 0) {
      if (Date.now() < this.#settleBy) {
        if (this.#closed) return settle(nak(0));
        this.#held.push(m);
        this.#armRelease();
        return;
      }
      // Wanted by the consumer's filters but by no handler here: acked, or
      // it would be redelivered until it expires.
      return settle(ACK);
    }
    const seenKey = `${event.source}\u0000${event.id}`;
    if (this.#seen.has(seenKey)) return settle(ACK);
    const n = deliveredCount(m.reply) || 1;
    let failed = false;
    for (const h of handlers) {
      try {
        await h(event);
      } catch (err) {
        failed = true;
        this.#log('warn', 'event handler failed; asking for the event again', { key: event.key, event: event.id, delivery: n, err: err?.message ?? String(err) });
      }
    }
    if (failed) return settle(nak(redeliveryDelayMs(n, this.#maxDeliver, this.#redeliveryMs)));
    this.#seen.set(seenKey, true);
    if (this.#seen.size > DEDUP_CAPACITY) this.#seen.delete(this.#seen.keys().next().value);
    return settle(ACK);
  }

  #armRelease() {
    if (this.#releaseTimer) return;
    this.#releaseTimer = setTimeout(() => {
      this.#releaseTimer = null;
      if (Date.now() < this.#settleBy) return this.#armRelease();
      const held = this.#held.splice(0);
      for (const m of held) this.#dispatch(m);
    }, Math.max(0, this.#settleBy - Date.now()) + 1);
    this.#releaseTimer.unref?.();
  }

  // close stops consuming, gives back what it held, lets the delivery in
  // hand finish, and closes the connection, which flushes what is queued
  // (the settlements among it).
  async close() {
    if (this.#closed) return;
    this.#closed = true;
    this.#puller?.stop();
    clearTimeout(this.#releaseTimer);
    for (const m of this.#held.splice(0)) this._client.publish(m.reply, nak(0)).catch(() => {});
    await Promise.race([this.#dispatching, new Promise((r) => setTimeout(r, this.#timeoutMs).unref?.())]);
    await this._client.close();
  }
}

// decode reads a delivery as an event, refusing with a WireError what is
// not one (docs/events.md). The key travels in the subject, never twice.
export function decode(m) {
  // A header block that is not NATS's reached the client as this one
  // message's fault (the server forwards whatever a publisher sends, and
  // EVENTS stores it): no envelope can be read from it, so it is refused
  // as having none, as the Go SDK refuses the same bytes.
  if (m.malformed) throw new wire.WireError('envelope', `malformed header block: ${m.malformed.message}`);
  const { module, key } = wire.eventOf(m.subject);
  const h = m.headers ?? new Map();
  wire.validateEvent(module, h, m.data, m.status ?? '');
  return {
    id: wire.headerValue(h, wire.HEADER_EVENT_ID),
    source: module,
    node: wire.headerValue(h, wire.HEADER_NODE),
    key: `${module}.${key}`,
    time: wire.headerValue(h, wire.HEADER_TIME),
    causation: wire.headerValue(h, wire.HEADER_CAUSATION_ID),
    schema: wire.headerValue(h, wire.HEADER_SCHEMA),
    body: m.data,
    headers: h,
  };
}

export { TimeoutError };
