import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Connection, ServerError, isRecoverable } from '../src/nats/connection.js';
import { memoryPair } from '../src/nats/transport.js';

const INFO = (extra = {}) => `INFO ${JSON.stringify({ server_id: 's1', version: '2.15.3', headers: true, max_payload: 1048576, ...extra })}\r\n`;

// up runs the handshake against the scripted server and returns both ends.
async function up(opts = {}, info = {}) {
  const { client, server } = memoryPair();
  server.send(INFO(info));
  const connecting = Connection.connect(client, opts);
  const connect = await server.line(/^CONNECT /);
  await server.line(/^PING$/);
  server.send('PONG\r\n');
  const c = await connecting;
  return { c, server, client, connect: JSON.parse(connect.slice('CONNECT '.length)) };
}

test('the handshake: INFO, then CONNECT with the credential and PING, up at the PONG', async () => {
  const { c, connect } = await up({ user: 'mod.node-a.sensor', pass: 'pw' });
  assert.equal(connect.user, 'mod.node-a.sensor');
  assert.equal(connect.pass, 'pw');
  assert.equal(connect.headers, true);
  assert.equal(connect.no_responders, true);
  assert.equal(connect.verbose, false);
  assert.equal(c.info.server_id, 's1');
  await c.close();
});

test('a second INFO after CONNECT (connect_info) is taken, and the handshake goes on', async () => {
  const { client, server } = memoryPair();
  server.send(INFO());
  const connecting = Connection.connect(client, {});
  await server.line(/^PING$/);
  server.send(INFO({ server_id: 's1', connect_urls: ['10.0.0.2:4222'] }) + 'PONG\r\n');
  const c = await connecting;
  assert.deepEqual(c.info.connect_urls, ['10.0.0.2:4222']);
  await c.close();
});

test('TLS the server requires is upgraded to before CONNECT is written', async () => {
  const { server, client, c } = await up({ tls: { servername: 'nats' } }, { tls_required: true });
  const i = server.events.findIndex((e) => e.upgrade);
  const j = server.events.findIndex((e) => e.write && e.write.toString().startsWith('CONNECT'));
  assert.ok(i >= 0 && i < j, 'the upgrade came before CONNECT');
  assert.equal(server.events[i].upgrade.servername, 'nats');
  assert.ok(client.upgraded);
  await c.close();
});

test('a server that wants TLS the client did not ask for is upgraded to all the same', async () => {
  const { client, c } = await up({}, { tls_required: true });
  assert.ok(client.upgraded, 'CONNECT is never written in the clear to a server that wants TLS');
  await c.close();
});

test("a refused login fails the connect with the server's words", async () => {
  const { client, server } = memoryPair();
  server.send(INFO());
  const connecting = Connection.connect(client, { user: 'nobody', pass: 'x' });
  await server.line(/^PING$/);
  server.send("-ERR 'Authorization Violation'\r\n");
  await assert.rejects(connecting, (err) => err instanceof ServerError && err.message === 'Authorization Violation');
  assert.ok(server.closed, 'the transport is closed');
});

test('a server that begins with anything but INFO is refused', async () => {
  const { client, server } = memoryPair();
  server.send('PONG\r\n');
  await assert.rejects(Connection.connect(client, {}), /began with PONG, not INFO/);
});

test("the server's PING is answered with a PONG", async () => {
  const { c, server } = await up();
  server.send('PING\r\n');
  await server.line(/^PONG$/);
  await c.close();
});

test('PONGs settle flushes in order, and a flush that timed out keeps its slot', async () => {
  const { c, server } = await up();
  await assert.rejects(c.flush(30), /no PONG within 30 ms/);
  await server.line(/^PING$/);
  const second = c.flush(2000);
  await server.line(/^PING$/);
  let settled = false;
  second.then(() => (settled = true));
  // The timed-out flush's PONG, then a PING of the server's: once the
  // client has answered that, it has read the PONG before it.
  server.send('PONG\r\nPING\r\n');
  await server.line(/^PONG$/);
  await Promise.resolve();
  assert.equal(settled, false, 'the first PONG settled the second flush a round trip early');
  server.send('PONG\r\n');
  await second;
  await c.close();
});

test('writes go out whole and in order, one after another', async () => {
  const { c, server } = await up();
  const writes = [];
  for (let i = 0; i < 50; i++) writes.push(c.write(`PUB a.${i} 1\r\n${i % 10}\r\n`));
  await Promise.all(writes);
  for (let i = 0; i < 50; i++) {
    await server.line(new RegExp(`^PUB a\\.${i} 1$`));
    await server.line(new RegExp(`^${i % 10}$`));
  }
  await c.close();
});

test('a -ERR the server leaves the connection open after is reported; any other ends it', async () => {
  const errors = [];
  const { c, server } = await up({ onError: (e) => errors.push(e.message) });
  server.send(`-ERR 'Permissions Violation for Publish to "mesh.x"'\r\n`);
  // A round trip after it: once the flush is settled, the -ERR before its
  // PONG has been read.
  const flushed = c.flush(2000);
  await server.line(/^PING$/);
  server.send('PONG\r\n');
  await flushed;
  assert.deepEqual(errors, ['Permissions Violation for Publish to "mesh.x"']);
  assert.equal(c.closed, null);
  const closed = new Promise((r) => c.onClosed(r));
  server.send("-ERR 'Stale Connection'\r\n");
  const cause = await closed;
  assert.ok(cause instanceof ServerError && cause.message === 'Stale Connection');
  await assert.rejects(c.write('PING\r\n'), /Stale Connection/);
});

test('bytes that are not NATS end the connection with that one cause', async () => {
  const { c, server } = await up();
  const closed = new Promise((r) => c.onClosed(r));
  server.send('MSG a 1 -3\r\n');
  const cause = await closed;
  assert.match(cause.message, /not one/);
  await assert.rejects(c.flush(100), (err) => err === cause);
});

test('which -ERR leave the connection open, as the protocol documents', () => {
  for (const m of ['Invalid Subject', 'Permissions Violation for Subscription to "x"']) assert.ok(isRecoverable(m), m);
  for (const m of ['Stale Connection', 'Authorization Violation', 'Maximum Payload Violation', 'Unknown Protocol Operation']) {
    assert.ok(!isRecoverable(m), m);
  }
});

test('close gives what is queued its chance to be written first', async () => {
  const { c, server } = await up();
  c.write('PUB a 1\r\nx\r\n');
  await c.close();
  await server.line(/^PUB a 1$/);
  assert.ok(server.closed);
});

// holdLoop keeps the event loop alive while a test waits on the
// keepalive's timer, which is unreferenced (a socket holds the loop in
// use; the scripted server holds nothing).
function holdLoop(t) {
  const h = setInterval(() => {}, 1000);
  t.after(() => clearInterval(h));
}

test('after silence the client PINGs; unanswered PINGs end the connection as stale', async (t) => {
  holdLoop(t);
  const { c, server } = await up({ pingIntervalMs: 30, maxPingsOut: 2 });
  await server.line(/^PING$/, 5000);
  server.send('PONG\r\n'); // answered: the connection lives on
  await server.line(/^PING$/, 5000);
  const closed = new Promise((r) => c.onClosed(r));
  await server.line(/^PING$/, 5000); // the second, unanswered too
  const cause = await closed;
  assert.match(cause.message, /stale connection: 2 keepalive PINGs unanswered/);
});

test('a server that speaks is not pinged', async (t) => {
  holdLoop(t);
  const { c, server } = await up({ pingIntervalMs: 1000 });
  for (let i = 0; i < 5; i++) {
    server.send('+OK\r\n');
    await new Promise((r) => setTimeout(r, 100)); // the server's own cadence, well under the interval
  }
  server.send('PING\r\n');
  // Only the answer to the server's PING: no keepalive PING came first.
  const first = await server.line(/^P[IO]NG$/, 5000);
  assert.equal(first, 'PONG');
  await c.close();
});
