// The SDK against the real nats-server with the sample mesh's composed
// grants, streams and consumers (features/testdata/mesh.yaml: sensor on
// node-a emits reading and alarm.raised; logger on node-b consumes
// sensor.reading and sensor.alarm.>), started by sdkjs_test.go. Run
// alone, without it, the suite says it skipped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';

import { connect } from '../../src/sdk/module.js';
import { DeniedError, FingerprintError, NoConsumerError } from '../../src/sdk/errors.js';

const env = process.env.MESH_E2E ? JSON.parse(process.env.MESH_E2E) : null;
const skip = env ? false : 'no bus: run through go test ./mesh/sdk-js';

const as = (user, opts = {}) => connect({ credential: env.creds[user].document, env: {}, timeoutMs: 5000, ...opts });

// eventually polls cond until it holds or timeoutMs passes.
async function eventually(what, cond, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('an event emitted by one module reaches another\'s handler through its consumer, once, and is acked', { skip }, async (t) => {
  const sensor = await as('mod.node-a.sensor');
  t.after(() => sensor.close());
  const logger = await as('mod.node-b.logger');
  t.after(() => logger.close());
  const got = [];
  await logger.subscribe('sensor.reading', async (e) => got.push(e));
  await logger.subscribe('sensor.alarm.>', async (e) => got.push(e));
  const id = randomUUID();
  assert.equal(await sensor.publish('reading', '{"celsius":21.5}', { id, causation: 'cause-1', schema: '1' }), id);
  // The server deduplicates the same id inside its window: still stored once.
  await sensor.publish('reading', '{"celsius":21.5}', { id });
  await sensor.publish('alarm.raised', { level: 'high' });
  await eventually('both events handled', () => got.length >= 2);
  const reading = got.find((e) => e.id === id);
  assert.deepEqual(
    { source: reading.source, node: reading.node, key: reading.key, causation: reading.causation, schema: reading.schema, body: reading.body.toString() },
    { source: 'sensor', node: 'node-a', key: 'sensor.reading', causation: 'cause-1', schema: '1', body: '{"celsius":21.5}' },
  );
  assert.equal(got.filter((e) => e.id === id).length, 1);
  assert.equal(got.find((e) => e.key === 'sensor.alarm.raised').body.toString(), '{"level":"high"}');
});

// The server forwards whatever header block a publisher sends, and EVENTS
// stores it (issue 18, finding 5): the consuming module terminates that
// delivery, counts it, keeps its connection and handles the next event.
test('an event stored with a malformed header block is terminated and counted; the consumer keeps its connection and takes the next', { skip }, async () => {
  const sensor = await as('mod.node-a.sensor');
  const statuses = [];
  const logger = await as('mod.node-b.logger', { log: (level, msg) => statuses.push(msg) });
  try {
    const got = [];
    await logger.subscribe('sensor.reading', async (e) => got.push(e.id));
    const conn = logger._client.connection;
    const refusedBefore = logger.refused;
    // Written raw: the SDK refuses to encode such a block.
    const head = `NATS/1.0\r\nNats-Msg-Id: ${randomUUID()}\r\nno colon here\r\n\r\n`;
    const body = '{"celsius":1}';
    await sensor._client.connection.write(`HPUB mesh.mod.sensor.event.reading ${head.length} ${head.length + body.length}\r\n${head}${body}\r\n`);
    const id = randomUUID();
    await sensor.publish('reading', '{"celsius":2}', { id });
    await eventually('the good event handled', () => got.includes(id));
    await eventually('the malformed one refused', () => logger.refused === refusedBefore + 1);
    assert.equal(logger._client.connection, conn);
    assert.equal(conn.closed, null);
    assert.ok(!statuses.some((s) => /^bus /.test(s)), statuses.join('; '));
  } finally {
    // Closed whatever happened: a client left open keeps the suite's process alive.
    await Promise.all([sensor.close(), logger.close()]);
  }
});

test('the server refuses what a module\'s grant does not allow, and the SDK says so at once', { skip }, async (t) => {
  const logger = await as('mod.node-b.logger');
  t.after(() => logger.close());
  // logger emits nothing: its own event subject is not granted.
  await assert.rejects(logger.publish('reading', '{}'), DeniedError);
  const sensor = await as('mod.node-a.sensor');
  t.after(() => sensor.close());
  // sensor consumes nothing: the controller made it no consumer.
  await assert.rejects(sensor.subscribe('sensor.reading', async () => {}), NoConsumerError);
});

test('a bus presenting another certificate than the pinned one is refused', { skip }, async () => {
  const doc = JSON.parse(env.creds['mod.node-a.sensor'].document);
  doc.fingerprint = '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08';
  await assert.rejects(connect({ credential: JSON.stringify(doc), env: {} }), FingerprintError);
});
