// What must hold at scale, not only for a few messages: a connection that
// stays open keeps nothing per command written, and a subscription that
// fell far behind drains in time proportional to what it holds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { Subscription } from '../src/nats/client.js';

test('200 000 writes on an open connection leave no heap behind', async () => {
  const script = fileURLToPath(new URL('./support/write-retention.js', import.meta.url));
  const out = await new Promise((resolve, reject) =>
    execFile(process.execPath, ['--expose-gc', script, '200000'], (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout))),
  );
  const { retained } = JSON.parse(out);
  // Each write kept ~300 B until the connection closed when every write
  // raced the connection's end: 60 MiB for these.
  assert.ok(retained < 8 * 1024 * 1024, `retained ${(retained / 1048576).toFixed(1)} MiB`);
});

test('a subscription holding 200 000 messages drains them in linear time', async () => {
  const client = { pendingMessages: 1e6, pendingBytes: 1e9, spent() {}, slow() {} };
  let release;
  const gate = new Promise((r) => (release = r));
  let handled = 0;
  let done;
  const all = new Promise((r) => (done = r));
  const sub = new Subscription(client, '1', 'x', async () => {
    if (handled++ === 0) await gate;
    if (handled === 200000) done();
  }, 0);
  const m = { data: Buffer.from('{}') };
  for (let i = 0; i < 200000; i++) sub.push(m);
  assert.equal(sub.pending, 199999);
  const started = Date.now();
  release();
  await all;
  // Array.prototype.shift made it 38 s, quadratic; linear is well under
  // a second here, and 10 s leaves room for a loaded machine.
  assert.ok(Date.now() - started < 10000, `drained in ${Date.now() - started} ms`);
  assert.equal(sub.pending, 0);
});
