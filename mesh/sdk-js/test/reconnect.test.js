// Reconnection (seed 002, "Reconnection", "Writing is serialised, and a
// write can wait for a reconnect"), against the scripted server: every
// dial hands out a fresh memoryPair, so a test drops one server and
// scripts the next.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Client, TimeoutError } from '../src/nats/client.js';
import { ServerError } from '../src/nats/connection.js';
import { ClosedError, PendingOverflowError, ProtocolError, ReconnectError } from '../src/nats/errors.js';
import { memoryDialer } from '../src/nats/transport.js';

// start connects a client through a memoryDialer; reconnect waits are
// short and without jitter unless the test says otherwise.
async function start(opts = {}, info = {}) {
  const d = memoryDialer();
  const statuses = [];
  const errors = [];
  const connecting = Client.connect({
    servers: ['nats://a:4222'],
    dial: d.dial,
    inboxPrefix: '_INBOX.t',
    reconnectWaitMs: 20,
    reconnectJitterMs: 0,
    onStatus: (e) => statuses.push(e),
    onError: (e) => errors.push(e),
    ...opts,
  });
  const first = await d.attempt(0);
  await first.server.accept(info);
  const c = await connecting;
  return { c, d, first, statuses, errors, kinds: () => statuses.map((e) => e.kind) };
}

// reconnect waits for the client's next dial attempt, plays the
// handshake on it, and returns it.
async function reconnect(d, n, info = {}) {
  const a = await d.attempt(n);
  await a.server.accept(info);
  return a;
}

// roundTrip is a flush the scripted server answers: what it sent before
// has been read.
async function roundTrip(c, a) {
  const f = c.flush(2000);
  await a.server.line(/^PING$/);
  a.server.send('PONG\r\n');
  await f;
}

async function waitFor(cond, ms = 2000) {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${cond}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

// stays checks cond holds throughout ms: the only way to see that
// something does not happen.
async function stays(cond, ms) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    assert.ok(cond(), `stopped holding: ${cond}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

// settledNow says whether p is already settled, without waiting on it.
async function settledNow(p) {
  const pending = {};
  const r = await Promise.race([p.then(() => 'resolved', (e) => e), new Promise((res) => setImmediate(() => res(pending)))]);
  return r === pending ? 'pending' : r;
}

test('a lost socket redials; every live subscription is sent again under its sid and queue, a max as what is left', async () => {
  const { c, d, first, statuses, kinds } = await start();
  const got = [];
  const a = c.subscribe('a.>', (m) => got.push(m.data.toString()), { queue: 'workers' });
  const b = c.subscribe('b', () => {}, { max: 3 });
  const once = c.subscribe('once', () => {}, { max: 1 });
  assert.equal(await first.server.line(/^SUB a/), `SUB a.> workers ${a.sid}`);
  await first.server.line(/^UNSUB 3 1$/);
  first.server.send(`MSG b ${b.sid} 1\r\nx\r\nMSG once ${once.sid} 1\r\nx\r\n`);
  await waitFor(() => b.left === 2 && once.left === 0);

  first.server.drop();
  const second = await reconnect(d, 1);
  assert.equal(second.host, 'a');
  assert.equal(await second.server.line(/./), `SUB a.> workers ${a.sid}`);
  assert.equal(await second.server.line(/./), `SUB b ${b.sid}`);
  assert.equal(await second.server.line(/./), `UNSUB ${b.sid} 2`);
  // The spent one is not asked for: the next line is a flush's PING.
  const flushed = c.flush(2000);
  assert.equal(await second.server.line(/./), 'PING');
  second.server.send(`PONG\r\nMSG a.x ${a.sid} 2\r\nhi\r\n`);
  await flushed;
  await waitFor(() => got.length === 1);
  assert.deepEqual(got, ['hi']);
  assert.deepEqual(kinds(), ['disconnected', 'reconnecting', 'reconnected']);
  assert.ok(statuses.every((e) => e.server === 'nats://a:4222'));
  assert.match(statuses[0].cause.message, /the connection was lost/);
  await c.close();
});

test('a write that fails ends the connection, and the client reconnects', async () => {
  const { c, d, first } = await start();
  first.server.breakWrites();
  await assert.rejects(c.publish('x', 'y'), /the connection was lost: write on a closed transport/);
  await reconnect(d, 1);
  await waitFor(() => c.connection !== first.client && c.connection.closed === null);
  const p = c.publish('x', 'again');
  assert.equal(await d.attempts[1].server.line(/^PUB /), 'PUB x 5');
  await p;
  await c.close();
});

test("the server's Stale Connection is a loss like any other: a fresh connection answers it", async () => {
  const { c, d, first, statuses } = await start();
  first.server.send("-ERR 'Stale Connection'\r\n");
  await reconnect(d, 1);
  await waitFor(() => statuses.some((e) => e.kind === 'reconnected'));
  const lost = statuses.find((e) => e.kind === 'disconnected');
  assert.ok(lost.cause instanceof ServerError && lost.cause.message === 'Stale Connection');
  await c.close();
});

test('the pool: the URLs in order, then connect_urls each once; discovered servers get TLS and the first name is checked', async () => {
  const { c, d } = await start(
    { servers: ['tls://a:4443', 'tls://b:4443'], tls: { fingerprint: 'ff' }, reconnectJitterTlsMs: 0 },
    { connect_urls: ['10.0.0.2:4443', 'a:4443', '10.0.0.2:4443'] },
  );
  d.attempts[0].server.send(`INFO ${JSON.stringify({ server_id: 'mem', connect_urls: ['10.0.0.2:4443', '[fd00::3]:4443'] })}\r\n`);
  await roundTrip(c, d.attempts[0]); // the INFO is read before the loss
  const order = [];
  for (let n = 0; n < 5; n++) {
    const a = n === 0 ? d.attempts[0] : await reconnect(d, n);
    order.push(`${a.host}:${a.port}`);
    const up = a.server.events.find((e) => e.upgrade);
    assert.deepEqual(up?.upgrade, { fingerprint: 'ff', servername: 'a' }, `attempt ${n} at ${a.host}`);
    await waitFor(() => c.connection?.closed === null && d.attempts.length === n + 1);
    a.server.drop();
  }
  assert.deepEqual(order, ['a:4443', 'b:4443', '10.0.0.2:4443', 'fd00::3:4443', 'a:4443']);
  await c.close();
});

test('the wait between attempts at one server, the attempts it gets, and the end once they are spent', async () => {
  const { c, d, first, statuses } = await start({ maxReconnectAttempts: 3, reconnectWaitMs: 40 });
  d.refuse = () => true;
  first.server.drop();
  const cause = await c.closed;
  assert.ok(cause instanceof ReconnectError, String(cause));
  assert.match(cause.message, /in 3 attempts each; the last: dial a:4222: connection refused/);
  assert.equal(d.attempts.length, 4, 'the first connection and three attempts');
  for (let i = 1; i < 4; i++) assert.ok(d.attempts[i].at - d.attempts[i - 1].at >= 38, `gap ${i}: ${d.attempts[i].at - d.attempts[i - 1].at} ms`);
  assert.equal(statuses.at(-1).kind, 'closed');
  assert.equal(statuses.filter((e) => e.kind === 'reconnecting').length, 3);
  await assert.rejects(c.publish('x', 'y'), (err) => err === cause);
  await assert.rejects(c.flush(100), (err) => err === cause);
});

test('each wait gets its random spread, the TLS one when the client uses TLS', async (t) => {
  const random = Math.random;
  Math.random = () => 0.99;
  t.after(() => (Math.random = random));
  // The least gap is the spread (99 ms) less what a timer and the two
  // clocks read a millisecond or two apart may take off it (a run here saw 97).
  for (const [opts, least, most] of [
    [{ reconnectJitterMs: 100, reconnectJitterTlsMs: 5000 }, 90, 1000],
    [{ servers: ['tls://a:4443'], tls: { fingerprint: 'ff' }, reconnectJitterMs: 5000, reconnectJitterTlsMs: 100 }, 90, 1000],
  ]) {
    const { c, d, first } = await start({ reconnectWaitMs: 0, maxReconnectAttempts: 1, ...opts });
    d.refuse = () => true;
    first.server.drop();
    await c.closed;
    const gap = d.attempts[1].at - d.attempts[0].at;
    assert.ok(gap >= least && gap < most, `${JSON.stringify(opts)}: gap ${gap} ms`);
  }
});

test('reconnect: false makes the loss the end', async () => {
  const { c, d, first, kinds } = await start({ reconnect: false });
  first.server.drop();
  const cause = await c.closed;
  assert.match(cause.message, /the connection was lost/);
  assert.deepEqual(kinds(), ['disconnected', 'closed']);
  await assert.rejects(c.publish('x', 'y'), (err) => err === cause);
  assert.throws(() => c.subscribe('x', () => {}), (err) => err === cause);
  assert.equal(d.attempts.length, 1);
});

test('bytes that are not NATS are latched: no reconnect, and every caller gets that one cause', async () => {
  const { c, d, first } = await start();
  const flushing = c.flush(2000);
  first.server.send('MSG a 1 -3\r\n');
  const cause = await c.closed;
  assert.ok(cause instanceof ProtocolError, String(cause));
  await assert.rejects(flushing, (err) => err === cause);
  await assert.rejects(c.publish('x', 'y'), (err) => err === cause);
  await assert.rejects(c.request('x', 'y'), (err) => err === cause);
  assert.throws(() => c.subscribe('x', () => {}), (err) => err === cause);
  await c.close(); // nothing left to close
  await stays(() => d.attempts.length === 1, 100);
});

test('what is written while down waits for the resubscriptions, then goes in order; a flush waits in line', async () => {
  const { c, d, first } = await start();
  const a = c.subscribe('a', () => {});
  const gone = c.subscribe('gone', () => {});
  await first.server.line(/^SUB gone/);
  d.refuse = () => true;
  first.server.drop();
  await waitFor(() => d.attempts.length >= 2);
  const late = c.publish('x', 'late');
  const b = c.subscribe('b', () => {}); // made while down
  c.unsubscribe(gone); // dropped while down: the new server never hears of it
  const flushed = c.flush(2000);
  assert.equal(await settledNow(late), 'pending');
  d.refuse = null;
  const next = await reconnect(d, d.attempts.length);
  const lines = [];
  for (let i = 0; i < 5; i++) lines.push(await next.server.line(/./));
  assert.deepEqual(lines, [`SUB a ${a.sid}`, `SUB b ${b.sid}`, 'PUB x 4', 'late', 'PING']);
  next.server.send('PONG\r\n');
  await late;
  await flushed;
  await c.close();
});

test('what waits while down is bounded: a publish past maxPendingWhileDownBytes is refused at once, and said once', async () => {
  const { c, d, first, errors } = await start({ maxPendingWhileDownBytes: 100 });
  d.refuse = () => true;
  first.server.drop();
  await waitFor(() => d.attempts.length >= 2);
  const body = 'x'.repeat(50); // PUB x 50␍␊ + 50 + ␍␊: 62 bytes
  const kept = c.publish('x', body);
  const refused = c.publish('x', body);
  const r = await settledNow(refused);
  assert.ok(r instanceof PendingOverflowError, String(r));
  assert.match(r.message, /62 bytes already wait for the reconnect, and maxPendingWhileDownBytes is 100/);
  await assert.rejects(c.publish('x', body), PendingOverflowError);
  assert.equal(errors.filter((e) => e instanceof PendingOverflowError).length, 1);
  d.refuse = null;
  const next = await reconnect(d, d.attempts.length);
  assert.equal(await next.server.line(/^PUB/), 'PUB x 50');
  await kept;
  await c.close();
});

test("close() while down fails what waits (nothing hangs) and stops the reconnect loop", async () => {
  const { c, d, first, statuses } = await start();
  d.refuse = () => true;
  first.server.drop();
  await waitFor(() => d.attempts.length >= 2);
  const p = c.publish('x', 'y');
  const f = c.flush(5000);
  await c.close();
  await assert.rejects(p, ClosedError);
  await assert.rejects(f, ClosedError);
  assert.ok((await c.closed) instanceof ClosedError);
  assert.equal(statuses.at(-1).kind, 'closed');
  const n = d.attempts.length;
  await stays(() => d.attempts.length === n, 100); // five reconnect waits
});

test('close() during a reconnect attempt ends it', async () => {
  const { c, d, first } = await start();
  first.server.drop();
  const a = await d.attempt(1);
  await c.close();
  assert.ok(a.server.closed, "the attempt's transport is closed");
  assert.ok((await c.closed) instanceof ClosedError);
});

test("the dead connection's flushes are failed, not left hanging", async () => {
  const { c, first } = await start();
  const f = c.flush(60000);
  await first.server.line(/^PING$/);
  first.server.drop();
  await assert.rejects(f, /the connection was lost/);
  await c.close();
});

test('a request in flight keeps its inbox across a reconnect: answered there, or timed out', async () => {
  const { c, d, first } = await start();
  const answered = c.request('svc', '{}', { timeoutMs: 2000 });
  const [, inbox, sid] = (await first.server.line(/^SUB /)).split(' ');
  await first.server.line(/^PUB svc/);
  first.server.drop();
  const second = await reconnect(d, 1);
  assert.equal(await second.server.line(/./), `SUB ${inbox} ${sid}`);
  assert.equal(await second.server.line(/./), `UNSUB ${sid} 1`);
  second.server.send(`MSG ${inbox} ${sid} 2\r\nok\r\n`);
  assert.equal((await answered).data.toString(), 'ok');

  d.refuse = () => true;
  second.server.drop();
  await waitFor(() => d.attempts.length >= 3);
  await assert.rejects(c.request('svc', '{}', { timeoutMs: 50 }), TimeoutError);
  d.refuse = null;
  const third = await reconnect(d, d.attempts.length);
  const flushed = c.flush(2000);
  // Neither the timed-out request's inbox nor its waiting PUB: the
  // caller has given up, so nobody is asked to act on it afterwards.
  assert.equal(await third.server.line(/./), 'PING');
  third.server.send('PONG\r\n');
  await flushed;
  await c.close();
});

test('a subscription the server refused is not asked for again', async () => {
  const { c, d, first, errors } = await start();
  const ok = c.subscribe('a', () => {});
  const no = c.subscribe('mesh.node.>', () => {});
  await first.server.line(/^SUB mesh/);
  first.server.send(`-ERR 'Permissions Violation for Subscription to "mesh.node.>"'\r\n`);
  await waitFor(() => no.refused !== null);
  assert.ok(errors.some((e) => /Permissions Violation/.test(e.message)));
  first.server.drop();
  const second = await reconnect(d, 1);
  const flushed = c.flush(2000);
  assert.equal(await second.server.line(/./), `SUB a ${ok.sid}`);
  assert.equal(await second.server.line(/./), 'PING');
  second.server.send('PONG\r\n');
  await flushed;
  await c.close();
});

test("lame duck: announced, the client works on, and reconnects elsewhere once the server goes", async () => {
  const { c, d, first, statuses } = await start();
  first.server.send(`INFO ${JSON.stringify({ server_id: 'mem', ldm: true, connect_urls: ['b:4222'] })}\r\n`);
  await waitFor(() => statuses.some((e) => e.kind === 'lameDuck'));
  assert.equal(statuses[0].server, 'nats://a:4222');
  const p = c.publish('still', 'here');
  assert.equal(await first.server.line(/^PUB/), 'PUB still 4');
  await p;
  first.server.drop();
  const second = await reconnect(d, 1);
  assert.equal(second.host, 'b');
  await waitFor(() => statuses.some((e) => e.kind === 'reconnected'));
  // close flushes on the reconnected client too
  c.publish('bye', 'x');
  await c.close();
  assert.equal(await second.server.line(/^PUB/), 'PUB bye 1');
});

test('close() on a reconnected client aborts a write stuck behind a server that stopped reading', async (t) => {
  // close's flush period is an unreferenced timer (a socket holds the
  // loop in use; the scripted server holds nothing)
  const hold = setInterval(() => {}, 1000);
  t.after(() => clearInterval(hold));
  const { c, d, first, statuses } = await start();
  first.server.drop();
  const second = await reconnect(d, 1);
  await waitFor(() => statuses.some((e) => e.kind === 'reconnected'));
  await roundTrip(c, second);
  second.client.write = () => new Promise(() => {}); // the server stopped reading
  const stuck = c.publish('x', 'y');
  const t0 = Date.now();
  await c.close(100);
  const took = Date.now() - t0;
  assert.ok(took >= 95 && took < 2000, `close took ${took} ms`);
  assert.ok(second.server.closed);
  await assert.rejects(stuck, /closed/);
  assert.ok((await c.closed) instanceof ClosedError);
});
