// The module's pull consumer, bound and drained over core NATS (design
// 19, "The consumer"): the controller created it; this SDK creates
// nothing, asks for messages on its MSG.NEXT subject with a reply inbox
// under the module's own prefix, and settles each on its reply subject.
// JetStream is not in the client (seed 002, "Not here"): these few
// subjects are the whole of what a module's grant lets it say to it.

import { randomBytes } from 'node:crypto';

import { consumerNext } from './wire.js';

// How the pull asks: BATCH messages per request, held open by the server
// for EXPIRES, with an idle heartbeat every HEARTBEAT while it waits, so a
// request the server no longer holds (a restarted server, a lost
// connection) is noticed after two silent heartbeats and asked again.
export const PULL = { batch: 64, expiresMs: 30000, heartbeatMs: 5000 };

// The server's status lines on a pull's inbox (JetStream's pull protocol).
const IDLE_HEARTBEAT = '100';
const NO_MESSAGES = '404';
const REQUEST_TIMEOUT = '408';
const CONFLICT = '409';

// How a message is settled on its reply subject ($JS.ACK.…).
export const ACK = '+ACK';
export const nak = (delayMs) => (delayMs > 0 ? `-NAK {"delay": ${Math.round(delayMs * 1e6)}}` : '-NAK');
export const term = (reason) => `+TERM ${reason}`;

// deliveredCount reads the server's count of deliveries of a message from
// its reply subject: $JS.ACK.<stream>.<consumer>.<delivered>.… (9
// tokens), or with a domain and an account hash before the stream (11 or
// 12 tokens).
export function deliveredCount(reply) {
  const t = reply.split('.');
  if (t[0] !== '$JS' || t[1] !== 'ACK') return 0;
  const at = t.length === 9 ? 4 : t.length >= 11 ? 6 : -1;
  const n = at < 0 ? NaN : Number(t[at]);
  return Number.isInteger(n) && n > 0 ? n : 0;
}

// Puller keeps pull requests outstanding on one inbox and hands each
// message, one at a time, to deliver(msg); statuses it answers itself.
export class Puller {
  #client;
  #subject;
  #inbox;
  #deliver;
  #onTrouble;
  #opts;
  #sub = null;
  #outstanding = 0; // messages asked for and not yet received
  #heard = 0;
  #watchdog = null;
  #stopped = false;

  constructor(client, { stream, consumer, inboxPrefix, deliver, onTrouble = () => {}, pull }) {
    this.#client = client;
    this.#subject = consumerNext(stream, consumer);
    this.#inbox = `${inboxPrefix}.pull.${randomBytes(8).toString('hex')}`;
    this.#deliver = deliver;
    this.#onTrouble = onTrouble;
    this.#opts = { ...PULL, ...pull };
  }

  start() {
    this.#sub = this.#client.subscribe(this.#inbox, (m) => this.#receive(m));
    this.#heard = Date.now();
    this.#pull();
    this.#watch();
  }

  // restart forgets the requests outstanding (a reconnect: the server that
  // held them may be another, or restarted) and asks again.
  restart() {
    if (this.#stopped) return;
    this.#outstanding = 0;
    this.#heard = Date.now();
    this.#pull();
  }

  stop() {
    this.#stopped = true;
    clearTimeout(this.#watchdog);
    if (this.#sub) this.#sub.unsubscribe();
  }

  #pull() {
    if (this.#stopped || this.#outstanding > this.#opts.batch / 2) return;
    const { batch, expiresMs, heartbeatMs } = this.#opts;
    this.#outstanding += batch;
    const body = JSON.stringify({ batch, expires: expiresMs * 1e6, idle_heartbeat: heartbeatMs * 1e6 });
    this.#client.publish(this.#subject, body, { reply: this.#inbox }).catch((err) => {
      this.#outstanding -= batch;
      this.#onTrouble(err);
    });
  }

  async #receive(m) {
    this.#heard = Date.now();
    if (m.status) {
      this.#status(m);
      return;
    }
    this.#outstanding = Math.max(0, this.#outstanding - 1);
    this.#pull();
    try {
      await this.#deliver(m);
    } finally {
      this.#heard = Date.now();
    }
  }

  #status(m) {
    switch (m.status) {
      case IDLE_HEARTBEAT:
        return;
      case NO_MESSAGES:
      case REQUEST_TIMEOUT: {
        // A request ended unfilled; the server says by how much.
        const left = Number((m.headers?.get('Nats-Pending-Messages') ?? [])[0]);
        this.#outstanding = Number.isInteger(left) ? Math.max(0, this.#outstanding - left) : 0;
        this.#pull();
        return;
      }
      case CONFLICT:
        // Consumer deleted, leadership changed, too many waiting requests:
        // what was asked is gone, and is asked again after a moment, while
        // the mesh settles.
        this.#onTrouble(new Error(`pull on ${this.#subject}: ${m.status} ${m.description}`));
        this.#outstanding = 0;
        setTimeout(() => this.#pull(), 1000).unref?.();
        return;
      default:
        this.#onTrouble(new Error(`pull on ${this.#subject}: unexpected status ${m.status} ${m.description}`));
    }
  }

  // #watch asks again when neither a message nor a heartbeat came for two
  // heartbeats: the server no longer holds the requests. The timer is
  // unreferenced: a module's consumer does not keep a finished script
  // alive.
  #watch() {
    const every = this.#opts.heartbeatMs;
    this.#watchdog = setTimeout(() => {
      if (this.#stopped) return;
      if (Date.now() - this.#heard > 2 * every) this.restart();
      this.#watch();
    }, every);
    this.#watchdog.unref?.();
  }
}
