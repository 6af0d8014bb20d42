// What the benchmark scripts share: the credentials the Go benchmark hands
// them (MESH_BENCH, the same document as the e2e suites' MESH_E2E), and
// the loop that runs one measurement per command line on stdin.
//
// Each script is started once, connects, prints {"ready":true}, then
// answers every line {"n":N,...} on stdin with one line of JSON: what it
// measured, timed inside node (process.hrtime), so node's start-up and
// connecting are not in the figure. stdin's end ends the script.

import { Client } from '../src/nats/client.js';

const env = process.env.MESH_BENCH ? JSON.parse(process.env.MESH_BENCH) : null;

// credential is user's: the pool (the URL without its userinfo), the
// login, the inbox prefix and the pinned fingerprint.
export function credential(user) {
  if (!env) throw new Error('MESH_BENCH is not set: run through go test -bench . ./mesh/sdk-js/');
  const c = env.creds[user];
  if (!c) throw new Error(`MESH_BENCH has no credential for ${user}`);
  const u = new URL(c.url);
  return {
    server: `${u.protocol}//${u.host}`,
    host: u.hostname,
    port: Number(u.port),
    user: decodeURIComponent(u.username),
    pass: decodeURIComponent(u.password),
    fingerprint: c.fingerprint,
    inbox: c.inbox,
    document: c.document,
  };
}

// connect is the client connected as user, with opts added.
export function connect(user, opts = {}) {
  const c = credential(user);
  return Client.connect({ servers: [c.server], user: c.user, pass: c.pass, inboxPrefix: c.inbox, tls: { fingerprint: c.fingerprint }, ...opts });
}

// serve prints ready, then runs measure(command) for every line of stdin,
// one at a time, printing its result; done runs when stdin ends.
export async function serve(measure, done = async () => {}) {
  process.stdout.write('{"ready":true}\n');
  let buffered = '';
  for await (const chunk of process.stdin) {
    buffered += chunk;
    for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
      const line = buffered.slice(0, nl).trim();
      buffered = buffered.slice(nl + 1);
      if (line === '') continue;
      const result = await measure(JSON.parse(line));
      process.stdout.write(JSON.stringify(result) + '\n');
    }
  }
  await done();
}

// fail prints why the script cannot go on and ends it, so the Go side
// reads the cause rather than a closed pipe.
export function fail(err) {
  process.stdout.write(JSON.stringify({ error: String(err?.stack ?? err) }) + '\n');
  process.exit(1);
}

export function now() {
  return process.hrtime.bigint();
}

// rate is n over the nanoseconds from start to end, per second.
export function rate(n, start, end) {
  return (n * 1e9) / Number(end - start);
}

// quantile of sorted durations in nanoseconds, in microseconds (nearest
// rank, as Go's side computes it).
export function quantileUs(sorted, q) {
  if (sorted.length === 0) return 0;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i] / 1000;
}
