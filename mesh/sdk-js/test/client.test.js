import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Client, NoRespondersError, TimeoutError } from '../src/nats/client.js';
import { MalformedMessageError } from '../src/nats/errors.js';
import { memoryPair } from '../src/nats/transport.js';

const INFO = `INFO ${JSON.stringify({ server_id: 's1', headers: true, max_payload: 1048576 })}\r\n`;

async function up(opts = {}) {
  const { client, server } = memoryPair();
  server.send(INFO);
  const connecting = Client.connect({ servers: ['nats://bus:4222'], dial: async () => client, inboxPrefix: '_INBOX.sensor.node-a', ...opts });
  await server.line(/^PING$/);
  server.send('PONG\r\n');
  return { c: await connecting, server };
}

test('an inbox prefix is required and never bare', async () => {
  for (const inboxPrefix of [undefined, '_INBOX', '_INBOX.>', 'mine.x']) {
    const { client } = memoryPair();
    await assert.rejects(Client.connect({ servers: ['nats://bus:4222'], dial: async () => client, inboxPrefix }), /inboxPrefix/);
  }
});

test('publish writes PUB, or HPUB with its header block counted', async () => {
  const { c, server } = await up();
  await c.publish('mesh.mod.sensor.event.reading', '{"v":1}');
  assert.equal(await server.line(/^PUB /), 'PUB mesh.mod.sensor.event.reading 7');
  assert.equal(await server.line(/./), '{"v":1}');
  await c.publish('mesh.mod.sensor.event.reading', '{}', { headers: { 'Nats-Msg-Id': 'e1' } });
  const line = await server.line(/^HPUB /);
  const [, , hdr, total] = line.split(' ');
  assert.equal(Number(hdr), 'NATS/1.0\r\nNats-Msg-Id: e1\r\n\r\n'.length);
  assert.equal(Number(total), Number(hdr) + 2);
  assert.throws(() => c.publish('mesh.mod.*.event.x', '{}'), /wildcard/);
  assert.throws(() => c.publish('a..b', '{}'), /tokens/);
  await c.close();
});

test('a subscription gets its messages in order, one handler call at a time', async () => {
  const { c, server } = await up();
  const got = [];
  let inHandler = 0;
  let most = 0;
  const sub = c.subscribe('a.>', async (m) => {
    inHandler++;
    most = Math.max(most, inHandler);
    await new Promise((r) => setTimeout(r, 1));
    got.push(m.data.toString());
    inHandler--;
  });
  const subLine = await server.line(/^SUB /);
  assert.equal(subLine, `SUB a.> ${sub.sid}`);
  for (let i = 0; i < 20; i++) server.send(`MSG a.b ${sub.sid} ${String(i).length}\r\n${i}\r\n`);
  await waitFor(() => got.length === 20);
  assert.deepEqual(got, Array.from({ length: 20 }, (_, i) => String(i)));
  assert.equal(most, 1);
  await c.close();
});

test('a request is answered on a fresh inbox under the credential prefix; a 503 is no responders', async () => {
  const { c, server } = await up();
  const answering = c.request('mesh.mod.catalog.tool.catalog_tools', '{}', { timeoutMs: 2000 });
  const sub = await server.line(/^SUB /);
  const [, inbox, sid] = sub.split(' ');
  assert.match(inbox, /^_INBOX\.sensor\.node-a\.[0-9a-f]{24}$/);
  assert.equal(await server.line(/^UNSUB /), `UNSUB ${sid} 1`);
  assert.equal(await server.line(/^PUB /), `PUB mesh.mod.catalog.tool.catalog_tools ${inbox} 2`);
  server.send(`MSG ${inbox} ${sid} 4\r\n{"a"\r\n`);
  assert.equal((await answering).data.toString(), '{"a"');

  const nobody = c.request('mesh.mod.x.tool.y', '{}', { timeoutMs: 2000 });
  const [, inbox2, sid2] = (await server.line(/^SUB /)).split(' ');
  const head = 'NATS/1.0 503\r\n\r\n';
  server.send(`HMSG ${inbox2} ${sid2} ${head.length} ${head.length}\r\n${head}\r\n`);
  await assert.rejects(nobody, NoRespondersError);

  await assert.rejects(c.request('mesh.mod.x.tool.y', '{}', { timeoutMs: 30 }), TimeoutError);
  await c.close();
});

// The server forwards whatever header block a publisher sends (issue 18,
// finding 5): one malformed answer or event is that message's problem,
// never the connection's.
test('an answer whose header block is malformed fails its request; the connection stays and the next request is answered', async () => {
  const { c, server } = await up();
  const conn = c.connection;
  const asking = c.request('mesh.mod.sensor.tool.calibrate', '{}', { timeoutMs: 2000 });
  const [, inbox, sid] = (await server.line(/^SUB /)).split(' ');
  const head = 'NATS/1.0\r\nno colon here\r\n\r\n';
  server.send(`HMSG ${inbox} ${sid} ${head.length} ${head.length + 2}\r\n${head}{}\r\n`);
  await assert.rejects(asking, (err) => err instanceof MalformedMessageError && /mesh\.mod\.sensor\.tool\.calibrate/.test(err.message) && /has no name/.test(err.message));
  assert.equal(c.malformed, 1);
  const again = c.request('mesh.mod.sensor.tool.calibrate', '{}', { timeoutMs: 2000 });
  const [, inbox2, sid2] = (await server.line(/^SUB /)).split(' ');
  server.send(`MSG ${inbox2} ${sid2} 2\r\n{}\r\n`);
  assert.equal((await again).data.toString(), '{}');
  assert.equal(c.connection, conn);
  assert.equal(conn.closed, null);
  await c.close();
});

test('a subscription gets a malformed message flagged and counted, and the messages after it', async () => {
  const { c, server } = await up();
  const got = [];
  const sub = c.subscribe('a.>', (m) => got.push(m));
  await server.line(/^SUB /);
  const head = 'NATS/1.0\r\nno colon here\r\n\r\n';
  server.send(`HMSG a.b ${sub.sid} $JS.ACK.x ${head.length} ${head.length + 1}\r\n${head}1\r\nMSG a.c ${sub.sid} 1\r\n2\r\n`);
  await waitFor(() => got.length === 2);
  assert.ok(got[0].malformed instanceof MalformedMessageError);
  assert.equal(got[0].reply, '$JS.ACK.x');
  assert.equal(got[1].malformed, undefined);
  assert.equal(got[1].data.toString(), '2');
  assert.equal(c.malformed, 1);
  assert.equal(c.connection.closed, null);
  await c.close();
});

test('a slow subscription is capped: what comes past the cap is dropped, counted, and said once per run', async () => {
  const errors = [];
  const { c, server } = await up({ pendingMessages: 5, onError: (e) => errors.push(e.message) });
  let release;
  const held = new Promise((r) => (release = r));
  let handled = 0;
  const sub = c.subscribe('flood', async () => {
    await held;
    handled++;
  });
  await server.line(/^SUB /);
  for (let i = 0; i < 100; i++) server.send(`MSG flood ${sub.sid} 1\r\nx\r\n`);
  await waitFor(() => sub.dropped + sub.pending >= 99);
  // One in the handler, five waiting, the rest dropped.
  assert.equal(sub.pending, 5);
  assert.equal(sub.dropped, 94);
  assert.equal(errors.filter((e) => e.startsWith('slow consumer')).length, 1);
  release();
  await waitFor(() => handled === 6);
  await c.close();
});

test('a subscription the server refuses is dropped, and reported', async () => {
  const errors = [];
  const { c, server } = await up({ onError: (e) => errors.push(e.message) });
  const sub = c.subscribe('mesh.node.>', () => {});
  await server.line(/^SUB /);
  server.send(`-ERR 'Permissions Violation for Subscription to "mesh.node.>"'\r\n`);
  await waitFor(() => sub.refused !== null);
  assert.match(errors[0], /Permissions Violation for Subscription/);
  await c.close();
});

async function waitFor(cond, ms = 2000) {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('not within the deadline');
    await new Promise((r) => setTimeout(r, 5));
  }
}

test('connect tries the servers in order; tls:// means TLS, checked for the first host', async () => {
  const dialled = [];
  const pairs = [];
  const dial = async (host, port) => {
    dialled.push(`${host}:${port}`);
    if (host === 'down') throw new Error('refused');
    const p = memoryPair();
    pairs.push(p);
    p.server.send(INFO);
    return p.client;
  };
  const connecting = Client.connect({ servers: ['tls://down:4443', 'nats://bus'], dial, inboxPrefix: '_INBOX.x', tls: { fingerprint: 'ab' } });
  const { server, client } = await waitForPair(pairs);
  await server.line(/^PING$/);
  server.send('PONG\r\n');
  const c = await connecting;
  assert.deepEqual(dialled, ['down:4443', 'bus:4222']);
  const up = server.events.find((e) => e.upgrade);
  assert.deepEqual(up.upgrade, { fingerprint: 'ab', servername: 'down' });
  assert.ok(client.upgraded);
  await c.close();
  assert.match((await c.closed).message, /closed/);
});

async function waitForPair(pairs) {
  await waitFor(() => pairs.length > 0);
  return pairs[0];
}
