// The envelope's rules and the credential, read from design 19's fixtures
// (features/fixtures): the same files the Go SDK's tests and both
// conformance drivers read.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import * as wire from '../src/sdk/wire.js';
import { parseCredential, CredentialError } from '../src/sdk/credential.js';
import { decode, redeliveryDelayMs } from '../src/sdk/module.js';
import { deliveredCount } from '../src/sdk/consumer.js';

const fixture = (name) => readFileSync(new URL(`../../../features/fixtures/${name}`, import.meta.url), 'utf8');
const json = (name) => JSON.parse(fixture(name));
const headersOf = (o) => new Map(Object.entries(o).map(([k, v]) => [k, [v]]));
const delivery = (f) => ({ subject: f.subject, headers: headersOf(f.headers), data: Buffer.from(f.body), status: '' });

test('a credential document is read as its expected reading says', () => {
  const c = parseCredential(fixture('credential.json'));
  const want = json('credential.expected.json');
  assert.equal(c.bootstrap, false);
  assert.equal(c.user, want.user);
  assert.equal(c.host, want.host);
  assert.equal(c.node, want.node);
  assert.equal(c.module, want.module);
  assert.equal(c.inbox, want.inbox);
  assert.equal(wire.eventSubject(c.module, 'reading'), want.subjects['event reading']);
  assert.equal(wire.moduleConsumer(c.node, c.module), want.subjects.consumer);
  assert.equal(c.tls, true, 'a pinned credential is TLS whatever its scheme');
});

test('a scoped credential missing its module is refused, naming the field', () => {
  assert.throws(() => parseCredential(fixture('credential-missing-module.json')), (err) => err instanceof CredentialError && /field module is missing/.test(err.message));
});

test('a plain URL is a bootstrap credential, never a module\'s', () => {
  const c = parseCredential(fixture('bootstrap.txt'));
  assert.equal(c.bootstrap, true);
  assert.equal(c.host, 'nats');
  assert.equal(c.node, undefined);
});

test('what is neither a document nor a URL is refused naming the problem, never echoing the password', () => {
  const doc = JSON.parse(fixture('credential.json'));
  const cases = [
    ['', /empty/],
    ['not a url', /no scheme:\/\/ found/],
    ['{"url": ', /not a JSON document nor a URL/],
    ['[1]', /bootstrap url: .*no scheme/],
    ['null', /bootstrap url/],
    [JSON.stringify({ ...doc, extra: 'x' }), /unknown field "extra"/],
    [JSON.stringify({ ...doc, principal: 'host' }), /field principal/],
    [JSON.stringify({ ...doc, url: 'amqps://mod.node-a.emitter:s3cret-pw@nats:5671' }), /NATS only/],
    [JSON.stringify({ ...doc, url: 'http://mod.node-a.emitter:s3cret-pw@nats:80' }), /is not one of tls, nats/],
    [JSON.stringify({ ...doc, url: 'tls://mod.node-a.emitter:s3cret-pw@nats:99999' }), /port 99999 out of range/],
    [JSON.stringify({ ...doc, url: 'tls://mod.node-a.emitter@nats:4222' }), /no password/],
    [JSON.stringify({ ...doc, url: 'tls://mod.node-a.other:s3cret-pw@nats:4222' }), /user "mod.node-a.other" is not module "emitter"/],
    [JSON.stringify({ ...doc, fingerprint: 'ABC' }), /field fingerprint: want 64 lower-case hex digits/],
    [JSON.stringify({ ...doc, fingerprint: undefined }), /field fingerprint is missing/],
    [JSON.stringify({ ...doc, node: 'Node_A' }), /field node: invalid name/],
  ];
  for (const [text, want] of cases) {
    assert.throws(() => parseCredential(text), (err) => {
      assert.ok(err instanceof CredentialError, `${text}: ${err}`);
      assert.match(err.message, want, text);
      assert.doesNotMatch(err.message, /s3cret-pw/, 'a refusal never carries the password');
      return true;
    });
  }
});

test('a delivery with an unknown x- header is read as the fixture says', () => {
  const f = json('delivery-unknown-header.json');
  const e = decode(delivery(f));
  const got = { id: e.id, source: e.source, node: e.node, key: e.key, time: e.time, causation: e.causation, schema: e.schema, body: e.body.toString() };
  assert.deepEqual(got, f.handled);
});

test('a delivery the envelope refuses names what the fixture says, as the Go reader does', () => {
  for (const name of ['delivery-missing-header.json', 'delivery-spoofed-source.json', 'delivery-not-json.json']) {
    const f = json(name);
    assert.throws(() => decode(delivery(f)), (err) => {
      assert.equal(err.part, f.refused, name);
      assert.ok(wire.refusalReason(err).startsWith(`envelope refused: ${f.refused}: `), wire.refusalReason(err));
      return true;
    });
  }
});

test('what is no envelope is refused as such: a status line, a PubAck aimed at an event subject, a seat\'s event', () => {
  const f = json('delivery-unknown-header.json');
  assert.throws(() => decode({ ...delivery(f), status: '100' }), { part: 'envelope' });
  assert.throws(() => decode({ subject: f.subject, headers: new Map(), data: Buffer.from('{"stream":"EVENTS","seq":1}') }), { part: 'envelope' });
  assert.throws(() => decode({ ...delivery(f), subject: 'mesh.seat.catalog.event.saved' }), { part: 'subject' });
  assert.throws(() => decode({ ...delivery(f), subject: 'mesh.mod.Emitter.event.reading' }), { part: 'subject' });
});

test('an envelope header repeated, over its limit, malformed or twinned in another case is refused, naming it', () => {
  const f = json('delivery-unknown-header.json');
  const base = () => headersOf(f.headers);
  const cases = [
    ['x-event-id', (h) => h.set('x-event-id', ['a', 'b'])],
    ['x-event-id', (h) => h.set('x-event-id', ['x'.repeat(129)])],
    ['x-event-id', (h) => h.set('x-event-id', ['has space'])],
    ['x-time', (h) => h.set('x-time', ['2026-02-30T10:00:00Z'])],
    ['x-time', (h) => h.set('x-time', ['yesterday'])],
    ['content-type', (h) => h.set('content-type', ['text/plain'])],
    ['x-node', (h) => h.set('x-node', ['Node-A'])],
    ['X-Source', (h) => h.set('X-Source', ['emitter'])],
    ['x-trace', (h) => h.set('x-trace', ['t'.repeat(4097)])],
    ['headers', (h) => { for (let i = 0; i < 5; i++) h.set(`x-pad-${i}`, ['p'.repeat(4000)]); }],
  ];
  for (const [part, change] of cases) {
    const h = base();
    change(h);
    assert.throws(() => wire.validateEvent('emitter', h, Buffer.from(f.body)), { part }, part);
  }
  const ok = base();
  ok.set('content-type', ['application/json; charset=utf-8']);
  ok.set('x-time', ['2026-09-26T12:00:02.123456789+02:00']);
  wire.validateEvent('emitter', ok, Buffer.from(f.body));
});

test('keys, patterns and matching follow the Go wire', () => {
  assert.equal(wire.matchKey('emitter.reading', 'emitter.reading'), true);
  assert.equal(wire.matchKey('emitter.alarm.>', 'emitter.alarm.raised'), true);
  assert.equal(wire.matchKey('emitter.alarm.>', 'emitter.alarm'), false);
  assert.equal(wire.matchKey('*.reading', 'emitter.reading'), true);
  assert.equal(wire.matchKey('emitter.*', 'emitter.alarm.raised'), false);
  assert.equal(wire.checkKey('alarm.raised'), null);
  assert.match(wire.checkKey('Alarm'), /must start with a lower-case letter/);
  assert.equal(wire.checkKeyPattern('alarm.>'), null);
  assert.match(wire.checkKeyPattern('>.alarm'), /invalid name/);
});

test('x-time is written as the Go emitter writes it', () => {
  const f = json('event.json');
  assert.equal(wire.formatTime(new Date(f.time)), f.wire.headers['x-time']);
});

test('a failing event waits 1 s (or the first wait given) doubling to 30 s, the last delivery given back at once', () => {
  assert.deepEqual([1, 2, 3, 4, 5].map((n) => redeliveryDelayMs(n, 5)), [1000, 2000, 4000, 8000, 0]);
  assert.equal(redeliveryDelayMs(6, 0), 30000);
  assert.equal(redeliveryDelayMs(0, 0), 1000);
  assert.deepEqual([1, 2, 3, 4, 5].map((n) => redeliveryDelayMs(n, 5, 250)), [250, 500, 1000, 2000, 0]);
});

test('the delivery count is read from both forms of the ack subject', () => {
  assert.equal(deliveredCount('$JS.ACK.EVENTS.node-b_consumer.3.10.9.1700000000000000000.0'), 3);
  assert.equal(deliveredCount('$JS.ACK.hub.ACCHASH.EVENTS.node-b_consumer.4.10.9.1700000000000000000.0.tok'), 4);
  assert.equal(deliveredCount('_INBOX.x.y'), 0);
});
