// A stalled subscriber flooded: a subscription whose handler never
// returns, capped at pendingMessages, is sent n messages from another
// connection. Prints what the client held, dropped and said,
// and how much the process's memory grew holding it; the Go test
// (TestAStalledSubscriberKeepsMemoryBounded) judges it. Run with
// --expose-gc so that the growth is what is still referenced, not garbage
// not yet collected.
//
//   node --expose-gc bench/stall.js '{"sub":"mod.node-a.sensor","pub":"person.bob","subject":"…","queue":"…","n":200000,"size":128,"pendingMessages":1000}'
//   -> {"published":…,"handled":…,"pending":…,"dropped":…,"slowReports":…,"otherErrors":[…],"growthMiB":…}

import { connect, fail } from './lib.js';

const setup = JSON.parse(process.argv[2] ?? '{}');
const WINDOW = 1024;

// held is what the process keeps reachable: the JS heap and the Buffers'
// memory outside it (a message's body is one).
function held() {
  globalThis.gc?.();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

try {
  if (!globalThis.gc) throw new Error('run with node --expose-gc');
  let slowReports = 0;
  const otherErrors = [];
  const subscriber = await connect(setup.sub, {
    pendingMessages: setup.pendingMessages,
    onError: (err) => (/slow consumer/.test(err.message) ? slowReports++ : otherErrors.push(err.message)),
  });
  const publisher = await connect(setup.pub);
  const payload = Buffer.alloc(setup.size, 'x');

  const stalled = new Promise(() => {});
  let handled = 0;
  const sub = subscriber.subscribe(
    setup.subject,
    async () => {
      handled++;
      await stalled;
    },
    { queue: setup.queue },
  );
  await subscriber.flush();
  const before = held();
  const start = process.hrtime.bigint();

  for (let i = 0; i < setup.n; i++) {
    const written = publisher.publish(setup.subject, payload);
    if (i % WINDOW === WINDOW - 1) await written;
  }
  await publisher.flush(60000);
  // The server wrote the subscriber's copies before it answered the
  // publisher's PING; the subscriber's own PONG comes after them all.
  await subscriber.flush(60000);

  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const growth = held() - before;
  const outcome = {
    published: setup.n,
    handled,
    pending: sub.pending,
    dropped: sub.dropped,
    slowReports,
    otherErrors,
    growthMiB: growth / (1 << 20),
    seconds,
    closed: subscriber.connection.closed ? String(subscriber.connection.closed) : null,
  };
  process.stdout.write(JSON.stringify(outcome) + '\n');
  // The handler is not released: what the subscription holds would be
  // handed over first, and that is not what is measured here (nor quick:
  // the queue is an array, shift() on a long one copies it).
  await Promise.all([subscriber.close(), publisher.close()]);
  process.exit(0);
} catch (err) {
  fail(err);
}
