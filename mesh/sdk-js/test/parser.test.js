import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Parser } from '../src/nats/parser.js';
import { MalformedMessageError, ProtocolError } from '../src/nats/errors.js';
import { encodeHeaders, decodeHeaders } from '../src/nats/headers.js';

const b = (s) => Buffer.from(s, 'utf8');

function all(p) {
  return [...p.commands()];
}

test('several commands in one chunk come out one by one, in order', () => {
  const p = new Parser();
  p.push(b('INFO {"server_id":"x","headers":true,"max_payload":1048576}\r\nPING\r\n+OK\r\nMSG a.b 1 5\r\nhello\r\nPONG\r\n'));
  const cmds = all(p);
  assert.deepEqual(cmds.map((c) => c.op), ['INFO', 'PING', '+OK', 'MSG', 'PONG']);
  assert.equal(cmds[0].info.max_payload, 1048576);
  assert.equal(cmds[3].subject, 'a.b');
  assert.equal(cmds[3].sid, '1');
  assert.equal(cmds[3].reply, '');
  assert.equal(cmds[3].data.toString(), 'hello');
  assert.equal(p.buffered, 0);
});

test('a command split across reads at every byte is read once, whole', () => {
  const wire = b('MSG orders.new 7 _INBOX.me.r1 11\r\nhello world\r\nHMSG h 2 22 27\r\nNATS/1.0\r\nx-id: 42\r\n\r\nhello\r\n');
  for (let cut = 1; cut < wire.length; cut++) {
    const p = new Parser();
    p.push(wire.subarray(0, cut));
    const first = all(p);
    p.push(wire.subarray(cut));
    const cmds = [...first, ...all(p)];
    assert.equal(cmds.length, 2, `cut at ${cut}`);
    assert.equal(cmds[0].reply, '_INBOX.me.r1');
    assert.equal(cmds[0].data.toString(), 'hello world');
    assert.equal(cmds[1].headers.get('x-id')[0], '42');
    assert.equal(cmds[1].data.toString(), 'hello');
    assert.equal(p.buffered, 0);
  }
});

test('a message whose body has not arrived is no error, only not yet a command', () => {
  const p = new Parser();
  p.push(b('MSG a 1 10\r\n01234'));
  assert.equal(p.next(), null);
  assert.equal(p.failed, null);
  p.push(b('56789'));
  assert.equal(p.next(), null); // the CRLF after it has not come either
  p.push(b('\r\n'));
  assert.equal(p.next().data.toString(), '0123456789');
});

test('an empty body and a body holding CRLF are bodies', () => {
  const p = new Parser();
  p.push(b('MSG a 1 0\r\n\r\nMSG a 1 4\r\n\r\n\r\n\r\n'));
  const [empty, crlf] = all(p);
  assert.equal(empty.data.length, 0);
  assert.equal(crlf.data.toString(), '\r\n\r\n');
});

test('HMSG: the status line and the headers, names as sent, values in order', () => {
  const head = 'NATS/1.0 503\r\n\r\n';
  const p = new Parser();
  p.push(b(`HMSG _INBOX.me.x 3 ${head.length} ${head.length}\r\n${head}\r\n`));
  const m = p.next();
  assert.equal(m.status, '503');
  assert.equal(m.data.length, 0);
  const block = encodeHeaders({ 'x-event-id': 'e1', 'Nats-Msg-Id': 'e1', 'x-multi': ['a', 'b'] });
  const h = decodeHeaders(block);
  assert.deepEqual(h.headers.get('x-multi'), ['a', 'b']);
  assert.deepEqual(h.headers.get('Nats-Msg-Id'), ['e1']);
  assert.equal(h.status, '');
});

test('-ERR carries the server words without their quotes', () => {
  const p = new Parser();
  p.push(b("-ERR 'Permissions Violation for Publish to \"mesh.x\"'\r\n"));
  assert.deepEqual(p.next(), { op: '-ERR', message: 'Permissions Violation for Publish to "mesh.x"' });
});

for (const [name, bytes, says] of [
  ['a negative length', 'MSG a 1 -5\r\nhello\r\n', 'not one'],
  ['a length that is not a number', 'MSG a 1 five\r\nhello\r\n', 'not one'],
  ['an absurd length', 'MSG a 1 99999999999\r\n', 'not one'],
  ['a body longer than a message may hold', 'MSG a 1 70000000\r\n', 'more than'],
  ['headers longer than the message', 'HMSG a 1 20 10\r\n', 'longer than the message'],
  ['a body not followed by CRLF', 'MSG a 1 2\r\nhello\r\n', 'not followed by CRLF'],
  ['a line that is no command', 'HELLO world\r\n', 'not a NATS command'],
  ['a MSG with too few arguments', 'MSG a 5\r\nhello\r\n', 'arguments'],
  ['an INFO that is not JSON', 'INFO {nope\r\n', 'not JSON'],
  ['a PING with arguments', 'PING now\r\n', 'with arguments'],
]) {
  test(`bytes that are not NATS latch one cause: ${name}`, () => {
    const p = new Parser();
    p.push(b(bytes));
    assert.throws(() => p.next(), (err) => err instanceof ProtocolError && err.message.includes(says));
    const first = p.failed;
    assert.ok(first instanceof ProtocolError);
    // Every caller, now and later, gets that one cause.
    assert.throws(() => p.next(), (err) => err === first);
    assert.throws(() => p.push(b('PING\r\n')), (err) => err === first);
  });
}

// The server forwards whatever header block a publisher sends (issue 18,
// finding 5): a block that is not NATS's is that message's fault, not the
// stream's. Its byte counts framed it, so the next command is read right.
for (const [name, head, says] of [
  ['a header line without a colon', 'NATS/1.0\r\nno colon here\r\n\r\n', 'has no name'],
  ['a header line with an empty name', 'NATS/1.0\r\n: value\r\n\r\n', 'has no name'],
  ['a block without its version', 'NATS/2.0\r\n\r\n', 'not NATS/1.0'],
  ['a status that is not three digits', 'NATS/1.0 5x3\r\n\r\n', 'three digits'],
  ['a block not ended by a blank line', 'NATS/1.0\r\nx: 1\r\n', 'blank line'],
]) {
  test(`a malformed header block is that message's fault, and the next command reads: ${name}`, () => {
    const headBytes = Buffer.from(head, 'latin1');
    const p = new Parser();
    p.push(Buffer.concat([b(`HMSG a.b 1 _INBOX.me.r ${headBytes.length} ${headBytes.length + 4}\r\n`), headBytes, b('body\r\nPING\r\n')]));
    const m = p.next();
    assert.equal(m.op, 'HMSG');
    assert.equal(m.subject, 'a.b');
    assert.equal(m.reply, '_INBOX.me.r');
    assert.equal(m.data.toString(), 'body');
    assert.ok(m.malformed instanceof MalformedMessageError, String(m.malformed));
    assert.match(m.malformed.message, new RegExp(says));
    assert.equal(m.status, '');
    assert.equal(m.headers.size, 0);
    assert.deepEqual(p.next(), { op: 'PING' });
    assert.equal(p.failed, null);
  });
}

test('a control line that never ends is refused once it passes the bound', () => {
  const p = new Parser({ maxControlLine: 32 });
  p.push(b('MSG ' + 'a'.repeat(20)));
  assert.equal(p.next(), null); // short: it may still end
  p.push(b('b'.repeat(20)));
  assert.throws(() => p.next(), /longer than 32 bytes/);
});

test('a header that would break the block is refused before it is sent', () => {
  assert.throws(() => encodeHeaders({ 'x-a': 'one\r\nx-forged: 1' }), /CR or LF/);
  assert.throws(() => encodeHeaders({ 'bad name': 'x' }), /header name/);
  assert.throws(() => encodeHeaders({ 'x:y': 'x' }), /header name/);
});
