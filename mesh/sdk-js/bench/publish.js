// Publish throughput through the client: n messages of size bytes on one
// subject, then a flush (the server has them all when its PONG comes).
//
//   node bench/publish.js '{"user":"person.bob","subject":"…","size":128}'
//   stdin: {"n":1000000}  ->  {"n":…,"seconds":…,"msgsPerSec":…}
//
// Publishes are not awaited one by one, as a program that publishes a
// stream does not; every window-th write is awaited, the client's
// backpressure as its caller sees it (each publish's promise settles once
// the socket has taken the bytes), so what waits is bounded.

import { connect, serve, fail, now, rate } from './lib.js';

const setup = JSON.parse(process.argv[2] ?? '{}');
const window = setup.window ?? 1024;

try {
  const client = await connect(setup.user);
  const payload = Buffer.alloc(setup.size ?? 128, 'x');
  await serve(
    async ({ n }) => {
      const start = now();
      for (let i = 0; i < n; i++) {
        const written = client.publish(setup.subject, payload);
        if (window > 0 && i % window === window - 1) await written;
      }
      await client.flush(120000);
      const end = now();
      return { n, seconds: Number(end - start) / 1e9, msgsPerSec: rate(n, start, end) };
    },
    () => client.close(),
  );
} catch (err) {
  fail(err);
}
