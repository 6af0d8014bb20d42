// Consume-and-ack through the SDK: a module connected before the clock
// starts subscribes once it has, and the clock stops when its handler has
// been given n events; the module is then closed, which flushes the acks
// of the last ones (the Go side checks the consumer has them all).
//
//   node bench/consume.js '{"user":"mod.node-b.logger","pattern":"sensor.reading"}'
//   stdin: {"n":100000}  ->  {"n":…,"seconds":…,"msgsPerSec":…}

import { connect as connectModule } from '../src/sdk/module.js';

import { credential, serve, fail, now, rate } from './lib.js';

const setup = JSON.parse(process.argv[2] ?? '{}');

try {
  const document = credential(setup.user).document;
  await serve(async ({ n }) => {
    const m = await connectModule({ credential: document, env: {} });
    let handled = 0;
    let all;
    const done = new Promise((r) => (all = r));
    const start = now();
    await m.subscribe(setup.pattern, async () => {
      if (++handled === n) all();
    });
    await done;
    const end = now();
    await m.close();
    return { n, seconds: Number(end - start) / 1e9, msgsPerSec: rate(n, start, end) };
  });
} catch (err) {
  fail(err);
}
