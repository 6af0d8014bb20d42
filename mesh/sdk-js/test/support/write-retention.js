// Run with --expose-gc by test/scale.test.js: how much heap N written
// commands leave behind on a connection that stays open, after a full
// collection. Prints {"retained": bytes}.
import { Connection } from '../../src/nats/connection.js';

const n = Number(process.argv[2] ?? 200000);

// A transport that speaks the handshake and then takes every write at
// once, keeping nothing: what stays on the heap is the connection's.
function sink() {
  const reads = [Buffer.from('INFO {"server_id":"x","headers":true,"max_payload":1048576}\r\n')];
  let waiting = null;
  let closed = false;
  return {
    async write(bytes) {
      if (bytes.toString().includes('PING\r\n') && waiting === null) reads.push(Buffer.from('PONG\r\n'));
      else if (bytes.toString().includes('PING\r\n')) {
        const w = waiting;
        waiting = null;
        w(Buffer.from('PONG\r\n'));
      }
    },
    read() {
      if (reads.length > 0) return Promise.resolve(reads.shift());
      if (closed) return Promise.resolve(null);
      return new Promise((r) => (waiting = r));
    },
    async upgrade() {},
    close() {
      closed = true;
      waiting?.(null);
    },
  };
}

const conn = await Connection.connect(sink(), { pingIntervalMs: 0 });
const frame = Buffer.from('PUB mesh.x 0\r\n\r\n');
global.gc();
const before = process.memoryUsage().heapUsed;
for (let i = 0; i < n; i += 1000) {
  const batch = [];
  for (let k = 0; k < 1000; k++) batch.push(conn.write(frame));
  await Promise.all(batch);
}
global.gc();
const retained = process.memoryUsage().heapUsed - before;
await conn.close(0);
process.stdout.write(`${JSON.stringify({ retained })}\n`);
