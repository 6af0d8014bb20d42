// A stalled subscriber flooded: a subscription whose handler never
// returns, capped at pendingMessages, is sent n messages by the Go test
// (TestAStalledSubscriberKeepsMemoryBounded) from a connection of its
// own; once it has published and flushed them it says so on stdin, and
// this prints what the client held, dropped and said, and how much the
// process's memory grew holding it, for the test to judge. Run with
// --expose-gc, so that the growth is what is still referenced, not
// garbage not yet collected. The publisher is not in this process: what
// is measured is the subscriber's alone.
//
//   node --expose-gc bench/stall.js '{"sub":"mod.node-a.sensor","subject":"…","queue":"…","pendingMessages":1000}'
//   -> {"ready":true}; stdin: {"n":200000} (published and flushed)
//   -> {"n":…,"handled":…,"pending":…,"dropped":…,"slowReports":…,"otherErrors":[…],"growthMiB":…}

import { connect, serve, fail } from './lib.js';

const setup = JSON.parse(process.argv[2] ?? '{}');

// held is what the process keeps reachable: the JS heap and the Buffers'
// memory outside it (a message's body is one).
function held() {
  globalThis.gc();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, buffers: m.arrayBuffers };
}

try {
  if (!globalThis.gc) throw new Error('run with node --expose-gc');
  let slowReports = 0;
  const otherErrors = [];
  const subscriber = await connect(setup.sub, {
    pendingMessages: setup.pendingMessages,
    onError: (err) => (/slow consumer/.test(err.message) ? slowReports++ : otherErrors.push(err.message)),
  });
  let handled = 0;
  const sub = subscriber.subscribe(
    setup.subject,
    async () => {
      handled++;
      await new Promise(() => {}); // never
    },
    { queue: setup.queue },
  );
  await subscriber.flush();
  const before = held();
  await serve(
    async ({ n }) => {
      // The server wrote this connection's copies before it answered the
      // publisher's flush; this PONG comes after them all.
      await subscriber.flush(60000);
      const after = held();
      return {
        n,
        handled,
        pending: sub.pending,
        dropped: sub.dropped,
        slowReports,
        otherErrors,
        growthMiB: (after.heap + after.buffers - before.heap - before.buffers) / (1 << 20),
        heapGrowthMiB: (after.heap - before.heap) / (1 << 20),
        buffersGrowthMiB: (after.buffers - before.buffers) / (1 << 20),
        closed: subscriber.connection.closed ? String(subscriber.connection.closed) : null,
      };
    },
    // The handler is never released: what the subscription holds would be
    // handed over first, which is not what is measured here (nor quick:
    // the queue is an array, and shift() on a long one copies it).
    () => process.exit(0),
  );
} catch (err) {
  fail(err);
}
