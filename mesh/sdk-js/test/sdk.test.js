// The SDK over the scripted server (test/support/jetstream.js): what it
// writes on the wire when it publishes, binds and settles, and what it
// does with each answer JetStream can give — observed on the server's
// side, never on the SDK's own account of itself.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { connect } from '../src/sdk/module.js';
import { BootstrapError, DeniedError, InvalidError, NoConsumerError, TimeoutError } from '../src/sdk/errors.js';
import { FakeJetStream } from './support/jetstream.js';

const fixture = (name) => readFileSync(new URL(`../../../features/fixtures/${name}`, import.meta.url), 'utf8');
const json = (name) => JSON.parse(fixture(name));

// The fixtures' credential is the emitter's; the consumer's is the same
// with its own identity.
const emitterCred = fixture('credential.json');
const consumerCred = JSON.stringify({ ...JSON.parse(emitterCred), url: 'tls://mod.node-b.consumer:pw@nats:4222', node: 'node-b', module: 'consumer' });

async function module(fake, credential = emitterCred, opts = {}) {
  return connect({ credential, dial: fake.dial, env: {}, timeoutMs: 2000, ...opts });
}

test('connect takes identity from the credential and overwrites the environment where it disagrees', async () => {
  const fake = new FakeJetStream();
  const env = json('environment.json');
  const m = await module(fake, emitterCred, { env });
  assert.equal(m.node, 'node-a');
  assert.equal(m.name, 'emitter');
  assert.deepEqual(env, { MESH_NODE: 'node-a', MESH_MODULE: 'emitter' });
  await m.close();
});

test('connect upgrades to TLS pinned to the credential\'s fingerprint, checking the name it dialled, before CONNECT', async () => {
  const fake = new FakeJetStream();
  const m = await module(fake);
  const events = fake.server.events;
  const upgrade = events.findIndex((e) => e.upgrade);
  const connectAt = events.findIndex((e) => e.write && e.write.toString().startsWith('CONNECT '));
  assert.ok(upgrade >= 0 && upgrade < connectAt, 'the upgrade comes before CONNECT');
  assert.deepEqual({ fingerprint: events[upgrade].upgrade.fingerprint, servername: events[upgrade].upgrade.servername }, { fingerprint: JSON.parse(emitterCred).fingerprint, servername: 'nats' });
  assert.match(events[connectAt].write.toString(), /"user":"mod.node-a.emitter"/);
  await m.close();
});

test('a bootstrap URL is refused as a module\'s credential', async () => {
  const fake = new FakeJetStream();
  await assert.rejects(module(fake, fixture('bootstrap.txt')), BootstrapError);
  assert.equal(fake.conns.length, 0, 'nothing was dialled');
});

test('an emitted event is the fixture on the wire: subject, each header, the message id, the body byte for byte', async () => {
  for (const name of ['event.json', 'event-optional.json']) {
    const fake = new FakeJetStream();
    const m = await module(fake);
    const f = json(name);
    const id = await m.publish(f.key, f.body, { id: f.id, time: new Date(f.time), causation: f.causation ?? '', schema: f.schema ?? '' });
    assert.equal(id, f.id);
    const [got] = fake.published;
    assert.equal(got.subject, f.wire.subject, name);
    assert.deepEqual(got.headers, { ...f.wire.headers, 'Nats-Msg-Id': f.wire.msg_id }, name);
    assert.equal(got.body, f.wire.body, name);
    await m.close();
  }
});

test('publish resolves only on the PubAck, and a refusing stream or no stream at all is an error', async () => {
  const fake = new FakeJetStream();
  const m = await module(fake);
  fake.pubAck = () => undefined; // the stream never answers
  await assert.rejects(m.publish('reading', '{}', { timeoutMs: 300 }), TimeoutError);
  fake.pubAck = () => ({ error: { code: 503, description: 'maximum messages exceeded' } });
  await assert.rejects(m.publish('reading', '{}'), /the stream refused it: maximum messages exceeded/);
  fake.pubAck = () => ({ stream: 'EVENTS', seq: 9, duplicate: true });
  assert.equal(await m.publish('reading', '{}', { id: 'same' }), 'same', 'a duplicate the server recognised is stored');
  await m.close();
});

test('what is not an event is refused before anything is sent', async () => {
  const fake = new FakeJetStream();
  const m = await module(fake);
  await assert.rejects(m.publish('Reading', '{}'), InvalidError);
  await assert.rejects(m.publish('reading', 'not json'), /not JSON/);
  await assert.rejects(m.publish('reading', '{}', { id: 'x'.repeat(129) }), /x-event-id: 129 bytes, over the limit of 128/);
  await assert.rejects(m.publish('reading', '{}', { schema: 'has space' }), /x-schema/);
  assert.equal(fake.published.length, 0);
  await m.close();
});

test('a publish the server refuses is denied, not a timeout', async () => {
  const fake = new FakeJetStream();
  fake.denied.add('mesh.mod.emitter.event.reading');
  const m = await module(fake);
  const started = Date.now();
  await assert.rejects(m.publish('reading', '{}'), DeniedError);
  assert.ok(Date.now() - started < 1500, 'answered by the -ERR, not by the timeout');
  await m.close();
});

test('subscribe binds the existing consumer and creates nothing; an absent one is NoConsumerError naming it', async () => {
  const fake = new FakeJetStream();
  fake.consumer = null;
  const m = await module(fake, consumerCred);
  await assert.rejects(m.subscribe('emitter.reading', async () => {}), (err) => err instanceof NoConsumerError && /node-b_consumer/.test(err.message));
  fake.denied.add('$JS.API.CONSUMER.INFO.EVENTS.node-b_consumer');
  await assert.rejects(m.subscribe('emitter.reading', async () => {}), NoConsumerError, 'a module not granted its consumer\'s info has none');
  await m.close();
});

// consuming connects the consumer module, subscribes pattern with
// handler, and waits for its first pull request.
async function consuming(pattern, handler, opts = {}) {
  const fake = new FakeJetStream();
  const m = await module(fake, consumerCred, opts);
  await m.subscribe(pattern, handler);
  await fake.until('a pull request', () => fake.pulls.length > 0);
  return { fake, m };
}

const deliveryOf = (name) => {
  const f = json(name);
  return { subject: f.subject, headers: f.headers, body: f.body, fixture: f };
};

test('a pull asks on the consumer\'s MSG.NEXT subject with a batch, an expiry and idle heartbeats, its reply under the module\'s inbox', async () => {
  const { fake, m } = await consuming('emitter.reading', async () => {});
  const [p] = fake.pulls;
  assert.equal(p.subject, '$JS.API.CONSUMER.MSG.NEXT.EVENTS.node-b_consumer');
  assert.match(p.reply, /^_INBOX\.consumer\.node-b\./);
  assert.ok(p.batch > 0 && p.expires > 0 && p.idle_heartbeat > 0 && p.idle_heartbeat < p.expires / 2, JSON.stringify(p));
  await m.close();
});

test('a delivery reaches the handler as the fixture says, and is acked', async () => {
  const got = [];
  const { fake, m } = await consuming('emitter.reading', async (e) => got.push(e));
  const d = deliveryOf('delivery-unknown-header.json');
  fake.deliver(d);
  await fake.until('the ack', () => fake.settled.length === 1);
  assert.equal(fake.settled[0].body, '+ACK');
  const e = got[0];
  assert.deepEqual({ id: e.id, source: e.source, node: e.node, key: e.key, time: e.time, causation: e.causation, schema: e.schema, body: e.body.toString() }, d.fixture.handled);
  await m.close();
});

test('the same event delivered twice is handled once and acked both times', async () => {
  let n = 0;
  const { fake, m } = await consuming('emitter.reading', async () => n++);
  const d = deliveryOf('delivery-twice.json');
  for (let i = 0; i < d.fixture.deliveries; i++) fake.deliver({ ...d, delivered: i + 1 });
  await fake.until('two acks', () => fake.settled.length === 2);
  assert.deepEqual(fake.settled.map((s) => s.body), ['+ACK', '+ACK']);
  assert.equal(n, d.fixture.handled);
  await m.close();
});

test('a delivery the envelope refuses is terminated with the reason naming the part, never handled', async () => {
  let n = 0;
  const { fake, m } = await consuming('emitter.reading', async () => n++);
  for (const name of ['delivery-missing-header.json', 'delivery-spoofed-source.json', 'delivery-not-json.json']) {
    fake.deliver(deliveryOf(name));
  }
  await fake.until('three terminations', () => fake.settled.length === 3);
  const parts = fake.settled.map((s) => /^\+TERM envelope refused: ([^:]+): /.exec(s.body)?.[1]);
  assert.deepEqual(parts, ['x-node', 'x-source', 'body']);
  assert.equal(n, 0);
  assert.equal(m.refused, 3);
  await m.close();
});

// The server forwards whatever header block a publisher sends, and EVENTS
// stores it (issue 18, finding 5): one such event is that delivery's
// problem, terminated and counted, never the module's connection.
test('a delivery whose header block is malformed is terminated and counted; the connection stays and the next is handled', async () => {
  const got = [];
  const { fake, m } = await consuming('emitter.reading', async (e) => got.push(e.id));
  const conn = m._client.connection;
  const d = deliveryOf('delivery-unknown-header.json');
  fake.deliver({ ...d, head: 'NATS/1.0\r\nno colon here\r\n\r\n' });
  fake.deliver(d);
  await fake.until('both settled', () => fake.settled.length === 2);
  assert.match(fake.settled[0].body, /^\+TERM envelope refused: envelope: .*header line "no colon here" has no name/);
  assert.equal(fake.settled[1].body, '+ACK');
  assert.deepEqual(got, [d.fixture.handled.id]);
  assert.equal(m.refused, 1);
  assert.equal(m._client.connection, conn);
  assert.equal(conn.closed, null);
  assert.equal(fake.conns.length, 1, 'no reconnect');
  await m.close();
});

test('a failing handler gives the event back after a delay doubling with each delivery, the last at once', async () => {
  const { fake, m } = await consuming('emitter.reading', async () => {
    throw new Error('away');
  });
  const d = deliveryOf('delivery-unknown-header.json');
  for (const delivered of [1, 2, 5]) fake.deliver({ ...d, delivered });
  await fake.until('three naks', () => fake.settled.length === 3);
  assert.deepEqual(fake.settled.map((s) => s.body), ['-NAK {"delay": 1000000000}', '-NAK {"delay": 2000000000}', '-NAK']);
  await m.close();
});

test('a delivery no handler wants is held while subscriptions settle, then acked; a later subscribe in the window takes it', async () => {
  const got = [];
  const { fake, m } = await consuming('emitter.reading', async (e) => got.push(e.key));
  fake.deliver({ ...deliveryOf('delivery-unknown-header.json'), subject: 'mesh.mod.emitter.event.alarm.raised' });
  fake.deliver({ ...deliveryOf('delivery-twice.json'), subject: 'mesh.mod.emitter.event.other' });
  await m.subscribe('emitter.alarm.>', async (e) => got.push(e.key));
  await fake.until('both settled after the window', () => fake.settled.length === 2, 5000);
  assert.deepEqual(fake.settled.map((s) => s.body), ['+ACK', '+ACK']);
  assert.deepEqual(got, ['emitter.alarm.raised']);
  await m.close();
});

test('a pull that ends unfilled (408), a conflict (409) and silence are each asked again; a heartbeat is not', async () => {
  const { fake, m } = await consuming('emitter.reading', async () => {}, { pull: { batch: 4, expiresMs: 1000, heartbeatMs: 200 } });
  const reply = fake.pulls[0].reply;
  fake.send(reply, '', { status: '100 Idle Heartbeat' });
  fake.send(reply, '', { status: '408 Request Timeout', headers: { 'Nats-Pending-Messages': '4', 'Nats-Pending-Bytes': '0' } });
  await fake.until('a pull after the 408', () => fake.pulls.length === 2);
  fake.send(reply, '', { status: '409 Consumer Deleted' });
  await fake.until('a pull after the 409', () => fake.pulls.length === 3, 3000);
  const before = fake.pulls.length;
  await fake.until('a pull after two silent heartbeats', () => fake.pulls.length > before, 3000);
  await m.close();
});

test('close gives back what it held and flushes its settlements', async () => {
  const { fake, m } = await consuming('emitter.reading', async () => {});
  fake.deliver({ ...deliveryOf('delivery-twice.json'), subject: 'mesh.mod.emitter.event.other' });
  await new Promise((r) => setTimeout(r, 100));
  await m.close();
  await fake.until('the held delivery given back', () => fake.settled.length === 1);
  assert.equal(fake.settled[0].body, '-NAK');
});
