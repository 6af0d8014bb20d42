// The NATS header block (HPUB, HMSG): "NATS/1.0[ <status>[ <description>]]"
// then "Name: value" lines, each ended by CRLF, and a blank line. The
// block's length, as HPUB and HMSG count it, includes that blank line.

import { MalformedMessageError } from './errors.js';

const VERSION = 'NATS/1.0';
const CRLF = '\r\n';

// encodeHeaders renders headers (a Map or an object of name -> string or
// array of strings) as a header block. A name or value that would break
// the block (CR, LF, a colon in a name) is refused rather than sent.
export function encodeHeaders(headers) {
  let out = VERSION + CRLF;
  const entries = headers instanceof Map ? headers.entries() : Object.entries(headers);
  for (const [name, value] of entries) {
    if (!/^[!-9;-~]+$/.test(name)) {
      throw new TypeError(`header name ${JSON.stringify(name)}: printable ASCII without a colon or space`);
    }
    for (const v of Array.isArray(value) ? value : [value]) {
      const s = String(v);
      if (/[\r\n]/.test(s)) {
        throw new TypeError(`header ${name}: a value may not hold CR or LF`);
      }
      out += `${name}: ${s}${CRLF}`;
    }
  }
  return Buffer.from(out + CRLF, 'utf8');
}

// decodeHeaders reads a header block: { status, description, headers },
// headers a Map of name -> array of values in arrival order (names as
// sent). A block that does not begin with the version line, or a line
// without a colon, is a MalformedMessageError: the server forwards any
// block a publisher sends, so it is that message's fault, not the
// stream's (issue 18, finding 5).
export function decodeHeaders(block) {
  const text = block.toString('utf8');
  if (!text.endsWith(CRLF + CRLF) && text !== VERSION + CRLF + CRLF) {
    throw new MalformedMessageError('header block not ended by a blank line');
  }
  const lines = text.slice(0, -4).split(CRLF);
  const first = lines.shift();
  if (!first.startsWith(VERSION)) {
    throw new MalformedMessageError(`header block begins ${JSON.stringify(first.slice(0, 16))}, not ${VERSION}`);
  }
  const rest = first.slice(VERSION.length).trim();
  let status = '';
  let description = '';
  if (rest !== '') {
    const sp = rest.indexOf(' ');
    status = sp < 0 ? rest : rest.slice(0, sp);
    description = sp < 0 ? '' : rest.slice(sp + 1).trim();
    if (!/^\d{3}$/.test(status)) {
      throw new MalformedMessageError(`header status ${JSON.stringify(status)} is not three digits`);
    }
  }
  const headers = new Map();
  for (const line of lines) {
    if (line === '') continue;
    const colon = line.indexOf(':');
    if (colon <= 0) {
      throw new MalformedMessageError(`header line ${JSON.stringify(line.slice(0, 32))} has no name`);
    }
    const name = line.slice(0, colon);
    const value = line.slice(colon + 1).trim();
    if (!headers.has(name)) headers.set(name, []);
    headers.get(name).push(value);
  }
  return { status, description, headers };
}
