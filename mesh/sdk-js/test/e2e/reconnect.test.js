// Reconnection against the real nats-server: a bus of the suite's own
// (MESH_E2E's restartable, started by sdkjs_test.go) that it stops and
// starts again on the same port, or puts in lame-duck mode, over a
// loopback line protocol ("stop", "start", "ldm", each answered "ok").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';

import { Client } from '../../src/nats/client.js';
import { connect as connectModule } from '../../src/sdk/module.js';

const env = process.env.MESH_E2E ? JSON.parse(process.env.MESH_E2E) : null;
const bus = env?.restartable ?? null;
const skip = bus ? false : 'no restartable bus: run through go test ./mesh/sdk-js';

// control sends the bus a command and resolves once it is done.
function control(cmd) {
  const [host, port] = [bus.control.slice(0, bus.control.lastIndexOf(':')), Number(bus.control.slice(bus.control.lastIndexOf(':') + 1))];
  return new Promise((resolve, reject) => {
    const s = net.connect({ host, port }, () => s.write(`${cmd}\n`));
    let got = '';
    s.on('data', (b) => {
      got += b.toString();
      const i = got.indexOf('\n');
      if (i < 0) return;
      s.destroy();
      const answer = got.slice(0, i);
      if (answer === 'ok') resolve();
      else reject(new Error(`${cmd}: ${answer}`));
    });
    s.on('error', reject);
  });
}

// connect dials the restartable bus as user, with short reconnect waits
// (the defaults, 2 s and up to 1 s of TLS jitter, would only slow the
// suite), every status event kept.
async function connect(user) {
  const c = bus.creds[user];
  const u = new URL(c.url);
  const statuses = [];
  const client = await Client.connect({
    servers: [`${u.protocol}//${u.host}`],
    user: decodeURIComponent(u.username),
    pass: decodeURIComponent(u.password),
    inboxPrefix: c.inbox,
    tls: { fingerprint: c.fingerprint },
    reconnectWaitMs: 100,
    reconnectJitterTlsMs: 100,
    onStatus: (e) => statuses.push(e),
  });
  return { client, statuses, saw: (kind) => statuses.some((e) => e.kind === kind) };
}

async function waitFor(cond, ms = 15000) {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${cond}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// The controller may both publish and hear mesh.control.<node>.alive:
// one client on both ends shows its subscription came back before a
// publish it made while down was written.
const ALIVE = 'mesh.control.node-e2e.alive';
const CALIBRATE = 'mesh.mod.sensor.tool.calibrate';

test('the clients survive the server stopped and started again on the same port', { skip }, async (t) => {
  const ctl = await connect('controller');
  t.after(() => ctl.client.close());
  const heard = [];
  ctl.client.subscribe(ALIVE, (m) => heard.push(m.data.toString()));
  const sensor = await connect('mod.node-a.sensor');
  t.after(() => sensor.client.close());
  sensor.client.subscribe(CALIBRATE, (m) => sensor.client.publish(m.reply, '{"offset":1}'), { queue: 'sensor.calibrate' });
  await sensor.client.flush();
  const bob = await connect('person.bob');
  t.after(() => bob.client.close());
  assert.equal((await bob.client.request(CALIBRATE, '{"to":1}', { timeoutMs: 5000 })).data.toString(), '{"offset":1}');
  await ctl.client.publish(ALIVE, 'before');
  await waitFor(() => heard.includes('before'));

  await control('stop');
  await waitFor(() => ctl.saw('disconnected') && sensor.saw('disconnected') && bob.saw('disconnected'));
  const late = ctl.client.publish(ALIVE, 'while down');
  const flushed = ctl.client.flush(20000);
  await control('start');
  await late;
  await flushed;
  await waitFor(() => heard.includes('while down'));

  await waitFor(() => sensor.saw('reconnected') && bob.saw('reconnected'));
  // 'reconnected' says the sensor's SUB was written, not that the server
  // has read it; bob's request comes on another connection and could
  // overtake it (CI saw "no responders"). The sensor's flush is the
  // server's word that it has.
  await sensor.client.flush(5000);
  // The sensor's tool subscription, queue group and all, is back.
  assert.equal((await bob.client.request(CALIBRATE, '{"to":2}', { timeoutMs: 5000 })).data.toString(), '{"offset":1}');
  for (const c of [ctl, sensor, bob]) {
    assert.equal(c.statuses[0].kind, 'disconnected');
    assert.equal(c.statuses.at(-1).kind, 'reconnected');
  }
});

test('a lame duck is announced, serves on through its grace period, and is left once it goes', { skip }, async (t) => {
  const ctl = await connect('controller');
  t.after(() => ctl.client.close());
  const heard = [];
  ctl.client.subscribe(ALIVE, (m) => heard.push(m.data.toString()));
  await ctl.client.flush();
  await control('ldm');
  await waitFor(() => ctl.saw('lameDuck'));
  assert.ok(!ctl.saw('disconnected'), 'told before it is closed');
  await ctl.client.publish(ALIVE, 'lame');
  await ctl.client.flush(1500); // within the 2 s grace
  await waitFor(() => heard.includes('lame'));
  await waitFor(() => ctl.saw('disconnected'));
  await control('start');
  await waitFor(() => ctl.saw('reconnected'));
  await ctl.client.publish(ALIVE, 'after');
  await waitFor(() => heard.includes('after'));
});

// The module's consumer across a restart: the server that held its pull
// requests is gone, so the SDK asks again once reconnected, and an event
// emitted after the restart reaches the handler, once.
test('a consuming module takes what was emitted after the server came back', { skip }, async (t) => {
  const fast = { reconnectWaitMs: 100, reconnectJitterTlsMs: 100 };
  const as = (user) => connectModule({ credential: bus.creds[user].document, env: {}, timeoutMs: 5000, client: fast });
  const logger = await as('mod.node-b.logger');
  t.after(() => logger.close());
  const got = [];
  await logger.subscribe('sensor.reading', async (e) => got.push(e.body.toString()));
  await control('stop');
  await control('start');
  const sensor = await as('mod.node-a.sensor');
  t.after(() => sensor.close());
  await sensor.publish('reading', '{"after":"restart"}');
  await waitFor(() => got.length > 0, 20000);
  assert.deepEqual(got, ['{"after":"restart"}']);
});
