// A bare Node writer, for reference beside the client: node:tls on a
// node:net socket, the handshake by hand, then n PUB frames built before
// the clock starts, written in blocks as fast as the socket takes them
// (waiting for 'drain' when it says it is full), then PING, done at PONG.
// What it does not do is everything a client does per message: build the
// frame, check the subject, queue the write.
//
//   node bench/writer.js '{"user":"person.bob","subject":"…","size":128}'
//   stdin: {"n":1000000}  ->  {"n":…,"seconds":…,"msgsPerSec":…}

import net from 'node:net';
import tls from 'node:tls';
import { createHash } from 'node:crypto';

import { credential, serve, fail, now, rate } from './lib.js';

const setup = JSON.parse(process.argv[2] ?? '{}');
const FRAMES_PER_BLOCK = 1024;

// Reader collects what the server sends, answers its PINGs, and resolves
// waiters on a line that matches.
class Reader {
  text = '';
  #waiters = [];
  #sock;

  attach(sock) {
    this.#sock = sock;
    sock.setEncoding('latin1');
    sock.on('data', (s) => {
      this.text += s;
      this.#check();
    });
  }

  #check() {
    for (;;) {
      const nl = this.text.indexOf('\r\n');
      if (nl < 0) return;
      const line = this.text.slice(0, nl);
      this.text = this.text.slice(nl + 2);
      if (line === 'PING') this.#sock?.write('PONG\r\n');
      if (line.startsWith('-ERR')) for (const w of this.#waiters.splice(0)) w.reject(new Error(line));
      const i = this.#waiters.findIndex((w) => w.re.test(line));
      if (i >= 0) this.#waiters.splice(i, 1)[0].resolve(line);
    }
  }

  line(re) {
    return new Promise((resolve, reject) => {
      this.#waiters.push({ re, resolve, reject });
      this.#check();
    });
  }
}

async function handshake(c) {
  const raw = net.connect({ host: c.host, port: c.port });
  await new Promise((resolve, reject) => raw.once('connect', resolve).once('error', reject));
  // INFO comes in the clear; read it off the raw socket, then TLS over it.
  const info = await new Promise((resolve, reject) => {
    let got = '';
    const onData = (b) => {
      got += b.toString('latin1');
      if (got.includes('\r\n')) {
        raw.off('data', onData);
        resolve(got.slice(0, got.indexOf('\r\n')));
      }
    };
    raw.on('data', onData);
    raw.once('error', reject);
  });
  if (!info.startsWith('INFO ')) throw new Error(`the server began with ${info.slice(0, 40)}`);
  const sock = tls.connect({ socket: raw, servername: net.isIP(c.host) ? undefined : c.host, rejectUnauthorized: false });
  await new Promise((resolve, reject) => sock.once('secureConnect', resolve).once('error', reject));
  const got = createHash('sha256').update(sock.getPeerCertificate().raw).digest('hex');
  if (got !== c.fingerprint.toLowerCase()) throw new Error(`fingerprint ${got}, not the pinned ${c.fingerprint}`);
  const reader = new Reader();
  reader.attach(sock);
  const connectOpts = { verbose: false, pedantic: false, headers: true, protocol: 1, lang: 'bare-node', version: '0', user: c.user, pass: c.pass };
  sock.write(`CONNECT ${JSON.stringify(connectOpts)}\r\nPING\r\n`);
  await reader.line(/^PONG$/);
  return { sock, reader };
}

try {
  const { sock, reader } = await handshake(credential(setup.user));
  const payload = Buffer.alloc(setup.size ?? 128, 'x');
  const frame = Buffer.concat([Buffer.from(`PUB ${setup.subject} ${payload.length}\r\n`), payload, Buffer.from('\r\n')]);
  const block = Buffer.concat(Array(FRAMES_PER_BLOCK).fill(frame));
  const write = (b) => (sock.write(b) ? null : new Promise((r) => sock.once('drain', r)));
  await serve(
    async ({ n }) => {
      const start = now();
      let left = n;
      while (left > 0) {
        const frames = Math.min(left, FRAMES_PER_BLOCK);
        const full = write(frames === FRAMES_PER_BLOCK ? block : block.subarray(0, frames * frame.length));
        if (full) await full;
        left -= frames;
      }
      const pong = reader.line(/^PONG$/);
      sock.write('PING\r\n');
      await pong;
      const end = now();
      return { n, seconds: Number(end - start) / 1e9, msgsPerSec: rate(n, start, end) };
    },
    () => sock.end(),
  );
} catch (err) {
  fail(err);
}
