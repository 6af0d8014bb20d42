// A scripted server for the SDK's unit suites: core NATS over the
// in-memory Transport, and just enough of JetStream's subjects for one
// module — its consumer's info, pull requests, settlements on the ack
// subjects, PubAcks — to be driven by a test and observed. No socket, no
// port (seed 002, "Testing without a port").

import { memoryPair } from '../../src/nats/transport.js';

const INFO = { server_id: 'fake', version: '2.15.0', proto: 1, headers: true, max_payload: 1048576 };

export class FakeJetStream {
  conns = []; // every connection the client dialled, newest last
  subs = new Map(); // subject -> sid, of the newest connection
  pulls = []; // { reply, batch, body } in arrival order
  settled = []; // { subject, body } on $JS.ACK.…
  published = []; // { subject, reply, headers, body } of everything else
  consumer = { config: { max_deliver: 5 } }; // CONSUMER.INFO's answer; null: 404
  pubAck = (p) => ({ stream: 'EVENTS', seq: this.published.length });
  denied = new Set(); // subjects a publish to is refused with -ERR
  #waiters = [];
  #seq = 0;

  // dial is the Transport dialler the client is given.
  dial = async () => {
    const { client, server } = memoryPair();
    this.conns.push(server);
    this.subs = new Map();
    server.send(`INFO ${JSON.stringify(INFO)}\r\n`);
    this.#serve(server);
    return client;
  };

  get server() {
    return this.conns.at(-1);
  }

  async #serve(server) {
    const next = () => server.line(/^/, 3600000);
    try {
      for (;;) {
        const line = await next();
        const [op, ...args] = line.split(' ');
        switch (op) {
          case 'CONNECT':
            break;
          case 'PING':
            server.send('PONG\r\n');
            break;
          case 'SUB':
            this.subs.set(args[0], args.at(-1));
            break;
          case 'UNSUB':
            for (const [s, sid] of this.subs) if (sid === args[0] && args.length === 1) this.subs.delete(s);
            break;
          case 'PUB':
          case 'HPUB': {
            const total = Number(args.at(-1));
            const hdr = op === 'HPUB' ? Number(args.at(-2)) : 0;
            const subject = args[0];
            const reply = args.length === (op === 'HPUB' ? 4 : 3) ? args[1] : '';
            let payload = '';
            while (Buffer.byteLength(payload) < total) payload += (payload === '' && total > 0 ? '' : '\r\n') + (await next());
            if (total === 0) await next();
            this.#publish(server, subject, reply, payload.slice(0, hdr), payload.slice(hdr));
            break;
          }
        }
      }
    } catch {
      // The transport closed.
    }
  }

  #publish(server, subject, reply, head, body) {
    if (this.denied.has(subject)) {
      server.send(`-ERR 'Permissions Violation for Publish to "${subject}"'\r\n`);
      return;
    }
    if (subject.startsWith('$JS.API.CONSUMER.INFO.')) {
      const answer = this.consumer ?? { error: { code: 404, err_code: 10014, description: 'consumer not found' } };
      this.send(reply, JSON.stringify(answer));
    } else if (subject.startsWith('$JS.API.CONSUMER.MSG.NEXT.')) {
      this.pulls.push({ reply, subject, ...JSON.parse(body) });
    } else if (subject.startsWith('$JS.ACK.')) {
      this.settled.push({ subject, body });
    } else {
      const p = { subject, reply, headers: parseHead(head), body };
      this.published.push(p);
      const ack = this.pubAck(p); // undefined: no answer at all
      if (reply && ack !== undefined) this.send(reply, JSON.stringify(ack));
    }
    for (const w of this.#waiters.splice(0)) w();
  }

  // send delivers a message to the client's subscription of subject; as
  // is the subject the MSG line names (JetStream delivers a stored
  // message under its own subject to the pull's inbox subscription).
  // head, when given, is the header block as raw text, sent as it is: the
  // server forwards whatever block a publisher sent.
  send(subject, body = '', { reply = '', headers, status, head, as = subject } = {}) {
    const sid = this.subs.get(subject);
    if (sid === undefined) return false;
    subject = as;
    const r = reply ? ` ${reply}` : '';
    if (head !== undefined || headers || status) {
      let h = head;
      if (h === undefined) {
        h = `NATS/1.0${status ? ` ${status}` : ''}\r\n`;
        for (const [k, v] of Object.entries(headers ?? {})) h += `${k}: ${v}\r\n`;
        h += '\r\n';
      }
      const hl = Buffer.byteLength(h);
      this.server.send(`HMSG ${subject} ${sid}${r} ${hl} ${hl + Buffer.byteLength(body)}\r\n${h}${body}\r\n`);
    } else {
      this.server.send(`MSG ${subject} ${sid}${r} ${Buffer.byteLength(body)}\r\n${body}\r\n`);
    }
    return true;
  }

  // deliver hands the newest pull request a stored event: subject, its
  // headers (an object), body, as the delivered-th delivery.
  deliver({ subject, headers, head, body, delivered = 1 }) {
    const pull = this.pulls.at(-1);
    if (!pull) throw new Error('no pull request to deliver on');
    this.#seq++;
    const consumer = pull.subject.split('.').at(-1);
    const ack = `$JS.ACK.EVENTS.${consumer}.${delivered}.${this.#seq}.${this.#seq}.${Date.now()}000000.0`;
    return this.send(pull.reply, body, { reply: ack, headers, head, as: subject });
  }

  // until resolves once cond() holds, polling on every command the
  // client sends, or fails after timeoutMs naming what.
  async until(what, cond, timeoutMs = 3000) {
    const deadline = Date.now() + timeoutMs;
    while (!cond()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`${what}: not within ${timeoutMs} ms`);
      await new Promise((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 50));
        this.#waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }
}

function parseHead(head) {
  const h = {};
  for (const line of head.split('\r\n').slice(1)) {
    if (line === '') continue;
    const i = line.indexOf(':');
    h[line.slice(0, i)] = line.slice(i + 1).trim();
  }
  return h;
}
