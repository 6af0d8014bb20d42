// The command boundary (seed 002, "The command boundary"). NATS is a line
// protocol with a byte-counted body, and a socket delivers it in whatever
// chunks it likes: a command split across two reads, a MSG whose payload
// has not arrived, several commands in one chunk. The parser accumulates
// bytes and alone decides when a command is complete. A buffer too short
// to say is not an error, only a command not yet arrived; bytes that are
// not NATS (a byte count that cannot be one, a body that can never fit, a
// line that is no command) are a ProtocolError, and the parser stays
// failed: every later call throws the same error, since the stream is at
// an unknown boundary and nothing after it can be read right. A header
// block that is not NATS's is not among them: the server forwards any
// block a publisher sends, and the message's byte counts framed it, so
// the message comes out with its malformed field set and the stream reads
// on (issue 18, finding 5: one such message closed a module's connection
// for good).

import { MalformedMessageError, ProtocolError } from './errors.js';
import { decodeHeaders } from './headers.js';

const CR = 0x0d;
const LF = 0x0a;

// Defaults: the largest control line the server sends is an INFO, well
// under this; the largest body is the server's max_payload, and 64 MiB is
// the most it can be configured to.
export const DEFAULT_MAX_CONTROL_LINE = 64 * 1024;
export const DEFAULT_MAX_PAYLOAD = 64 * 1024 * 1024;

const COUNT = /^\d{1,10}$/;

export class Parser {
  #buf = Buffer.alloc(0);
  #off = 0;
  #failed = null;
  #maxLine;
  #maxPayload;

  constructor({ maxControlLine = DEFAULT_MAX_CONTROL_LINE, maxPayload = DEFAULT_MAX_PAYLOAD } = {}) {
    this.#maxLine = maxControlLine;
    this.#maxPayload = maxPayload;
  }

  // failed is the error the parser latched, or null.
  get failed() {
    return this.#failed;
  }

  // buffered is how many bytes wait for the rest of their command.
  get buffered() {
    return this.#buf.length - this.#off;
  }

  // push appends bytes the socket delivered.
  push(chunk) {
    if (this.#failed) throw this.#failed;
    if (chunk.length === 0) return;
    const rest = this.#buf.subarray(this.#off);
    this.#buf = rest.length === 0 ? Buffer.from(chunk) : Buffer.concat([rest, chunk]);
    this.#off = 0;
  }

  // next returns the next complete command, or null while the buffer is
  // too short to hold one. It throws a ProtocolError, and keeps throwing
  // it, once the bytes are not NATS.
  next() {
    if (this.#failed) throw this.#failed;
    try {
      return this.#next();
    } catch (err) {
      if (err instanceof ProtocolError) this.#failed = err;
      throw err;
    }
  }

  // commands drains every complete command buffered.
  *commands() {
    for (let c = this.next(); c !== null; c = this.next()) yield c;
  }

  #next() {
    const buf = this.#buf;
    const start = this.#off;
    const end = lineEnd(buf, start, this.#maxLine);
    if (end < 0) {
      if (buf.length - start > this.#maxLine) {
        throw new ProtocolError(`a control line longer than ${this.#maxLine} bytes without CRLF`);
      }
      return null;
    }
    const line = buf.toString('latin1', start, end);
    const after = end + 2; // past CRLF
    const sp = line.search(/[ \t]/);
    const op = (sp < 0 ? line : line.slice(0, sp)).toUpperCase();
    const rest = sp < 0 ? '' : line.slice(sp + 1).trim();
    switch (op) {
      case 'PING':
      case 'PONG':
      case '+OK':
        if (rest !== '') throw new ProtocolError(`${op} with arguments: ${JSON.stringify(line.slice(0, 64))}`);
        this.#off = after;
        return { op };
      case '-ERR':
        this.#off = after;
        return { op, message: unquote(rest) };
      case 'INFO': {
        let info;
        try {
          info = JSON.parse(buf.toString('utf8', start + sp + 1, end));
        } catch (err) {
          throw new ProtocolError(`INFO that is not JSON: ${err.message}`);
        }
        if (info === null || typeof info !== 'object' || Array.isArray(info)) {
          throw new ProtocolError('INFO that is not a JSON object');
        }
        this.#off = after;
        return { op, info };
      }
      case 'MSG':
        return this.#message(line, after, false);
      case 'HMSG':
        return this.#message(line, after, true);
    }
    throw new ProtocolError(`not a NATS command: ${JSON.stringify(line.slice(0, 64))}`);
  }

  // #message reads MSG <subject> <sid> [reply] <bytes> and HMSG <subject>
  // <sid> [reply] <header bytes> <total bytes>, and their body once it has
  // all arrived with its CRLF.
  #message(line, after, headed) {
    const args = line.split(/[ \t]+/).slice(1);
    const counts = headed ? 2 : 1;
    if (args.length !== 2 + counts && args.length !== 3 + counts) {
      throw new ProtocolError(`${headed ? 'HMSG' : 'MSG'} with ${args.length} arguments: ${JSON.stringify(line.slice(0, 96))}`);
    }
    const [subject, sid] = args;
    const reply = args.length === 3 + counts ? args[2] : '';
    const nums = args.slice(args.length - counts).map((s) => this.#count(s, line));
    const total = nums[nums.length - 1];
    const hdrLen = headed ? nums[0] : 0;
    if (hdrLen > total) {
      throw new ProtocolError(`HMSG whose headers (${hdrLen} bytes) are longer than the message (${total}): ${JSON.stringify(line.slice(0, 96))}`);
    }
    const buf = this.#buf;
    if (buf.length < after + total + 2) return null; // the body has not all arrived
    if (buf[after + total] !== CR || buf[after + total + 1] !== LF) {
      throw new ProtocolError(`a message body of ${total} bytes not followed by CRLF: ${JSON.stringify(line.slice(0, 96))}`);
    }
    const body = buf.subarray(after, after + total);
    this.#off = after + total + 2;
    const msg = { op: headed ? 'HMSG' : 'MSG', subject, sid, reply, data: Buffer.from(body.subarray(hdrLen)) };
    if (headed) {
      let h;
      try {
        h = decodeHeaders(body.subarray(0, hdrLen));
      } catch (err) {
        if (!(err instanceof MalformedMessageError)) throw err;
        msg.malformed = err;
        h = { status: '', description: '', headers: new Map() };
      }
      msg.status = h.status;
      msg.description = h.description;
      msg.headers = h.headers;
    }
    return msg;
  }

  #count(s, line) {
    if (!COUNT.test(s)) throw new ProtocolError(`a byte count ${JSON.stringify(s)} that is not one: ${JSON.stringify(line.slice(0, 96))}`);
    const n = Number(s);
    if (n > this.#maxPayload) {
      throw new ProtocolError(`a body of ${n} bytes, more than the ${this.#maxPayload} a message may hold`);
    }
    return n;
  }
}

// lineEnd is the index of the CR of the first CRLF at or after start,
// looking no further than max bytes, or -1.
function lineEnd(buf, start, max) {
  const limit = Math.min(buf.length - 1, start + max);
  for (let i = buf.indexOf(CR, start); i >= 0 && i < limit; i = buf.indexOf(CR, i + 1)) {
    if (buf[i + 1] === LF) return i;
  }
  return -1;
}

// unquote strips the single quotes the server puts around an error's text.
function unquote(s) {
  return s.length >= 2 && s.startsWith("'") && s.endsWith("'") ? s.slice(1, -1) : s;
}
