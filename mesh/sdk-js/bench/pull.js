// Pull-consume-and-ack through the client, at the client's level: pull
// requests on the consumer's MSG.NEXT subject, each message acked on its
// reply subject, until n have been; the acks flushed before the clock
// stops. Like nats.go's Messages(), batch messages are asked for at a
// time, and more as soon as half of what was asked has come, so the
// server always has a request to deliver to.
//
//   node bench/pull.js '{"user":"mod.node-b.logger","next":"$JS.API.CONSUMER.MSG.NEXT.…","batch":500}'
//   stdin: {"n":100000}  ->  {"n":…,"seconds":…,"msgsPerSec":…}
//
// Each run pulls on an inbox of its own, unsubscribed (and flushed) when
// it is done: a request still open then is one the server drops, having
// nobody to deliver to, rather than one handing the next run's messages
// to this run.

import { connect, credential, serve, fail, now, rate } from './lib.js';

const setup = JSON.parse(process.argv[2] ?? '{}');
const batch = setup.batch ?? 500;
const EXPIRES_NS = 5e9;

try {
  const client = await connect(setup.user);
  const inboxPrefix = credential(setup.user).inbox;
  let run = 0;
  await serve(
    ({ n }) =>
      new Promise((resolve, reject) => {
        const inbox = `${inboxPrefix}.pull.${++run}`;
        let asked = 0; // messages asked for and neither delivered nor expired
        let acked = 0;
        let start;
        const ask = () => {
          asked += batch;
          client.publish(setup.next, JSON.stringify({ batch, expires: EXPIRES_NS }), { reply: inbox }).catch(reject);
        };
        const sub = client.subscribe(inbox, (m) => {
          if (m.status) {
            // 408 (expired) and 409 (limits) end a request with what it
            // still had: ask again for that much.
            const left = Number(m.headers?.get('Nats-Pending-Messages')?.[0] ?? 0);
            asked -= left;
            if (m.status === '404' || m.status === '408' || m.status === '409') {
              if (acked < n && asked <= batch / 2) ask();
              return;
            }
            return reject(new Error(`pull answered ${m.status} ${m.description ?? ''}`));
          }
          asked--;
          client.publish(m.reply, '').catch(reject);
          if (++acked === n) {
            client
              .flush(60000)
              .then(() => {
                const end = now();
                sub.unsubscribe();
                return client.flush(60000).then(() => resolve({ n, seconds: Number(end - start) / 1e9, msgsPerSec: rate(n, start, end) }));
              })
              .catch(reject);
            return;
          }
          if (asked <= batch / 2 && acked + asked < n) ask();
        });
        client
          .flush()
          .then(() => {
            start = now();
            ask();
          })
          .catch(reject);
      }),
    () => client.close(),
  );
} catch (err) {
  fail(err);
}
