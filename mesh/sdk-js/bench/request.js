// Request/reply latency through the client: n requests one after another
// on subject, each timed from the call to its answer.
//
//   node bench/request.js '{"user":"person.bob","subject":"…","body":"{…}"}'
//   stdin: {"n":10000}  ->  {"n":…,"seconds":…,"p50us":…,"p99us":…}

import { connect, serve, fail, now, quantileUs } from './lib.js';

const setup = JSON.parse(process.argv[2] ?? '{}');

try {
  const client = await connect(setup.user);
  const body = Buffer.from(setup.body ?? '{}');
  await serve(
    async ({ n }) => {
      const took = new Float64Array(n);
      const start = now();
      for (let i = 0; i < n; i++) {
        const t = now();
        await client.request(setup.subject, body, { timeoutMs: 5000 });
        took[i] = Number(now() - t);
      }
      const end = now();
      took.sort();
      return { n, seconds: Number(end - start) / 1e9, p50us: quantileUs(took, 0.5), p99us: quantileUs(took, 0.99) };
    },
    () => client.close(),
  );
} catch (err) {
  fail(err);
}
