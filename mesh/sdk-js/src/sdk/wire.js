// The wire of design 19 as this SDK speaks it: subjects, names, headers,
// the envelope's rules and limits, and the reason a refusal gives. It is
// the JavaScript spelling of the Go module mesh/wire, rule for rule
// (docs/events.md), and the one place in this SDK any of it is spelled;
// the conformance fixtures (features/fixtures) keep the two in step.

export const STREAM_EVENTS = 'EVENTS';

export const ENV_CREDENTIAL = 'MESH_CREDENTIAL';
export const ENV_NODE = 'MESH_NODE';
export const ENV_MODULE = 'MESH_MODULE';

export const HEADER_EVENT_ID = 'x-event-id';
export const HEADER_SOURCE = 'x-source';
export const HEADER_NODE = 'x-node';
export const HEADER_TIME = 'x-time';
export const HEADER_CONTENT_TYPE = 'content-type';
export const HEADER_CAUSATION_ID = 'x-causation-id';
export const HEADER_SCHEMA = 'x-schema';
export const CONTENT_TYPE_JSON = 'application/json';

// JetStream's own header: the server refuses a second publish of the same
// id inside the stream's window.
export const HEADER_MSG_ID = 'Nats-Msg-Id';

export const REQUIRED_HEADERS = [HEADER_EVENT_ID, HEADER_SOURCE, HEADER_NODE, HEADER_TIME, HEADER_CONTENT_TYPE];
export const OPTIONAL_HEADERS = [HEADER_CAUSATION_ID, HEADER_SCHEMA];
const ENVELOPE_HEADERS = [...REQUIRED_HEADERS, ...OPTIONAL_HEADERS];

// The envelope's limits (mesh/wire's Max… constants): the same for every
// implementation, so what one reader accepts every other does too. A value
// over its limit is refused, never cut.
export const MAX_ID_BYTES = 128;
export const MAX_TIME_BYTES = 64;
export const MAX_SCHEMA_BYTES = 64;
export const MAX_CONTENT_TYPE_BYTES = 128;
export const MAX_HEADER_VALUE_BYTES = 4096;
export const MAX_HEADER_BYTES = 16384;

export const eventSubject = (module, key) => `mesh.mod.${module}.event.${key}`;
export const moduleUser = (node, module) => `mod.${node}.${module}`;
export const moduleInbox = (node, module) => `_INBOX.${module}.${node}`;
export const moduleConsumer = (node, module) => `${node}_${module}`;
export const consumerInfo = (stream, consumer) => `$JS.API.CONSUMER.INFO.${stream}.${consumer}`;
export const consumerNext = (stream, consumer) => `$JS.API.CONSUMER.MSG.NEXT.${stream}.${consumer}`;

// WireError is what the checks below refuse with. part is what a refusal
// names (refusalReason): a header's name, 'body', 'headers', 'subject' or
// 'envelope'.
export class WireError extends Error {
  constructor(part, message) {
    super(message);
    this.name = 'WireError';
    this.part = part;
  }
}

// refusalReason is the reason a reader terminates a delivery with,
// "envelope refused: PART: DETAIL", the same in every implementation: the
// server repeats it in its MSG_TERMINATED advisory, the one account of a
// refusal anyone outside the module hears.
export function refusalReason(err) {
  const part = err instanceof WireError ? err.part : 'envelope';
  return `envelope refused: ${part}: ${err.message}`;
}

// checkName: a node, module or seat name — 1–32 bytes of a-z 0-9 -,
// starting with a letter (it becomes a subject token, part of a consumer's
// durable name and of a user's name).
export function checkName(s) {
  if (typeof s !== 'string' || s === '') return 'invalid name: empty';
  if (s.length > 32) return `invalid name: ${JSON.stringify(s)} is longer than 32 bytes`;
  if (!/^[a-z]/.test(s)) return `invalid name: ${JSON.stringify(s)} must start with a lower-case letter`;
  const bad = /[^a-z0-9-]/.exec(s);
  if (bad) return `invalid name: ${JSON.stringify(s)} has ${JSON.stringify(bad[0])} at byte ${bad.index} (allowed: a-z 0-9 -)`;
  return null;
}

function checkKeyToken(tok) {
  if (tok === '') return 'invalid name: empty token';
  if (tok.length > 64) return `invalid name: token ${JSON.stringify(tok)} is longer than 64 bytes`;
  if (!/^[a-z]/.test(tok)) return `invalid name: token ${JSON.stringify(tok)} must start with a lower-case letter`;
  const bad = /[^a-z0-9_-]/.exec(tok);
  if (bad) return `invalid name: token ${JSON.stringify(tok)} has ${JSON.stringify(bad[0])} at byte ${bad.index} (allowed: a-z 0-9 _ -)`;
  return null;
}

// checkKey: an event key, dot-separated tokens of a-z 0-9 _ -.
export function checkKey(s) {
  if (typeof s !== 'string' || s === '') return 'invalid name: empty key';
  for (const tok of s.split('.')) {
    const err = checkKeyToken(tok);
    if (err) return `${err} in key ${JSON.stringify(s)}`;
  }
  return null;
}

// checkKeyPattern is checkKey with '*' as a whole token and '>' as the
// whole last one.
export function checkKeyPattern(s) {
  if (typeof s !== 'string' || s === '') return 'invalid name: empty pattern';
  const toks = s.split('.');
  for (let i = 0; i < toks.length; i++) {
    if (toks[i] === '*' || (toks[i] === '>' && i === toks.length - 1)) continue;
    const err = checkKeyToken(toks[i]);
    if (err) return `${err} in pattern ${JSON.stringify(s)}`;
  }
  return null;
}

// matchKey: key against pattern with NATS wildcard semantics over tokens.
// One consumer may carry filters wider than one handler's pattern, so
// the handlers to run are decided here (design 19, "The consumer").
export function matchKey(pattern, key) {
  const p = pattern.split('.');
  const k = key.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return i === p.length - 1 && k.length > i;
    if (i >= k.length) return false;
    if (p[i] !== '*' && p[i] !== k[i]) return false;
  }
  return p.length === k.length;
}

// eventOf recovers the emitting module and the key from
// mesh.mod.<module>.event.<key>; a seat's subject names a role, not the
// module x-source must name, and is refused with its own reason.
export function eventOf(subject) {
  if (subject.startsWith('mesh.seat.')) {
    throw new WireError('subject', `not a module event subject: ${JSON.stringify(subject)} is a seat's: its subject names a role, not the module whose x-source it must carry`);
  }
  const rest = subject.startsWith('mesh.mod.') ? subject.slice('mesh.mod.'.length) : null;
  const at = rest === null ? -1 : rest.indexOf('.event.');
  if (at < 0) throw new WireError('subject', `not a module event subject: ${JSON.stringify(subject)}`);
  const module = rest.slice(0, at);
  const key = rest.slice(at + '.event.'.length);
  if (checkName(module) || checkKey(key)) throw new WireError('subject', `not a module event subject: ${JSON.stringify(subject)}`);
  return { module, key };
}

// formatTime is how an emitter writes x-time: RFC 3339 in UTC with three
// fractional digits — Date.toISOString's form and Go's wire.TimeLayout, so
// two implementations emit the same bytes for the same instant.
export function formatTime(d) {
  return d.toISOString();
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-](\d{2}):(\d{2}))$/;

// validTime reads RFC 3339 as Go's time.Parse(RFC3339Nano) does: every
// field in its range, the day within its month.
export function validTime(v) {
  const m = RFC3339.exec(v);
  if (!m) return false;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number);
  if (mo < 1 || mo > 12 || h > 23 || mi > 59 || s > 59) return false;
  if (d < 1 || d > new Date(Date.UTC(y, mo, 0)).getUTCDate()) return false;
  if (m[9] !== undefined && (Number(m[9]) > 23 || Number(m[10]) > 59)) return false;
  return true;
}

const clip = (v) => (Buffer.byteLength(v) > 64 ? `${JSON.stringify(v.slice(0, 64))}…` : JSON.stringify(v));
const clipName = (n) => (n.length > 64 ? `${n.slice(0, 64)}…` : n);

function visibleASCII(v) {
  if (v === '') return 'empty';
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return `byte ${i} is 0x${c.toString(16)}; only visible ASCII is allowed`;
  }
  return null;
}

function contentType(v) {
  const [type, ...params] = v.split(';');
  const ok = type.trim().toLowerCase() === CONTENT_TYPE_JSON && params.every((p) => /^\s*[!#$%&'*+\-.^_`|~0-9A-Za-z]+=("[^"]*"|[!#$%&'*+\-.^_`|~0-9A-Za-z]+)\s*$/.test(p));
  return ok ? null : `not ${CONTENT_TYPE_JSON}`;
}

const RULES = {
  [HEADER_EVENT_ID]: [MAX_ID_BYTES, visibleASCII],
  [HEADER_SOURCE]: [32, checkName],
  [HEADER_NODE]: [32, checkName],
  [HEADER_TIME]: [MAX_TIME_BYTES, (v) => (validTime(v) ? null : 'not RFC 3339')],
  [HEADER_CONTENT_TYPE]: [MAX_CONTENT_TYPE_BYTES, contentType],
  [HEADER_CAUSATION_ID]: [MAX_ID_BYTES, visibleASCII],
  [HEADER_SCHEMA]: [MAX_SCHEMA_BYTES, visibleASCII],
};

const first = (h, name) => (h.get(name) ?? [])[0] ?? '';

// validateHeaders checks an event's headers (a Map of name -> values, as
// the client decodes them) in mesh/wire's order: an envelope at all, the
// sizes, every required header present (the first missing one named),
// each envelope header once, within its limit and of its form, and no
// envelope header beside a twin in another case. Any other header, an
// unknown x- header among them, is accepted and ignored (design 19).
export function validateHeaders(h, status = '') {
  if (status !== '') throw new WireError('envelope', `not an event's envelope: a status message (Status ${clip(status)})`);
  if (!ENVELOPE_HEADERS.some((n) => h.has(n))) {
    throw new WireError('envelope', "not an event's envelope: no envelope header (a reply such as a PubAck aimed at an event subject, or no event at all)");
  }
  let total = 0;
  for (const [name, vs] of h) {
    for (const v of vs) {
      const n = Buffer.byteLength(v);
      if (n > MAX_HEADER_VALUE_BYTES) throw new WireError(clipName(name), `invalid header: ${clipName(name)}: ${n} bytes, over the limit of ${MAX_HEADER_VALUE_BYTES}`);
      total += Buffer.byteLength(name) + n + 4;
    }
  }
  if (total > MAX_HEADER_BYTES) throw new WireError('headers', `headers too large: ${total} bytes, over the limit of ${MAX_HEADER_BYTES}`);
  for (const name of REQUIRED_HEADERS) {
    if (first(h, name) === '') throw new WireError(name, `missing required header: ${name}`);
  }
  for (const name of ENVELOPE_HEADERS) {
    const vs = h.get(name);
    if (!vs) continue;
    if (vs.length > 1) throw new WireError(name, `invalid header: ${name}: ${vs.length} values; the envelope has one`);
    if (vs.length === 0 || vs[0] === '') continue;
    const [max, check] = RULES[name];
    const n = Buffer.byteLength(vs[0]);
    if (n > max) throw new WireError(name, `invalid header: ${name}: ${n} bytes, over the limit of ${max}`);
    const bad = check(vs[0]);
    if (bad) throw new WireError(name, `invalid header: ${name}: ${clip(vs[0])}: ${bad}`);
  }
  for (const name of h.keys()) {
    const lower = name.toLowerCase();
    if (lower !== name && RULES[lower]) {
      throw new WireError(clipName(name), `invalid header: ${clipName(name)}: ${lower} in another case: a reader that folds case could take it for the envelope's`);
    }
  }
}

// validateEvent checks a delivered event whole: its headers, that
// x-source is the module its subject names (the bus lets only that module
// publish there), and that the body is JSON.
export function validateEvent(source, h, body, status = '') {
  validateHeaders(h, status);
  const got = first(h, HEADER_SOURCE);
  if (got !== source) throw new WireError(HEADER_SOURCE, `x-source disagrees with the subject: x-source: ${clip(got)} on a subject of ${clip(source)}`);
  if (!isJSON(body)) throw new WireError('body', `the body is not JSON: ${body.length} bytes`);
}

export function isJSON(bytes) {
  try {
    JSON.parse(Buffer.from(bytes).toString('utf8'));
    return true;
  } catch {
    return false;
  }
}

// headerValue is the first value of a header, or '': how every reader
// takes one.
export const headerValue = first;
