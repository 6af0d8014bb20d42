// One event from a module's publish (PubAck awaited) to another module's
// handler, through the SDK, n times one after another, each timed from
// the publish to the handler's call. Both modules are connected, and the
// consumer bound, before the first run.
//
//   node bench/event.js '{"pub":"mod.node-a.sensor","sub":"mod.node-b.logger","key":"reading","pattern":"sensor.reading","body":"{…}"}'
//   stdin: {"n":2000}  ->  {"n":…,"seconds":…,"p50us":…,"p99us":…}

import { connect as connectModule } from '../src/sdk/module.js';

import { credential, serve, fail, now, quantileUs } from './lib.js';

const setup = JSON.parse(process.argv[2] ?? '{}');

try {
  const emitter = await connectModule({ credential: credential(setup.pub).document, env: {} });
  const consumer = await connectModule({ credential: credential(setup.sub).document, env: {} });
  let handled = () => {};
  await consumer.subscribe(setup.pattern, async () => handled());
  await serve(
    async ({ n }) => {
      const took = new Float64Array(n);
      const start = now();
      for (let i = 0; i < n; i++) {
        const t = now();
        const got = new Promise((r) => (handled = r));
        await emitter.publish(setup.key, setup.body);
        await got;
        took[i] = Number(now() - t);
      }
      const end = now();
      took.sort();
      return { n, seconds: Number(end - start) / 1e9, p50us: quantileUs(took, 0.5), p99us: quantileUs(took, 0.99) };
    },
    () => Promise.all([emitter.close(), consumer.close()]),
  );
} catch (err) {
  fail(err);
}
