// The credential (design 19, "The floor"): a module's document, or a
// plain string that is a bootstrap URL. Every subject this SDK touches is
// derived from the document's node and module, so a scoped document
// without them is refused, naming the field, never guessed at. No refusal
// carries the URL's password.

import { checkName, moduleInbox, moduleUser } from './wire.js';

export class CredentialError extends Error {
  constructor(message) {
    super(`invalid credential: ${message}`);
    this.name = 'CredentialError';
  }
}

const URL_FORM = 'tls://user:password@host:port';
const FIELDS = ['url', 'fingerprint', 'node', 'module'];

// redact shows a URL with its password replaced.
export function redact(url) {
  return url.replace(/^([a-z]+:\/\/[^:@/]*:)[^@/]*@/i, '$1xxxxx@');
}

// parseCredential reads a credential's text. It returns
// { bootstrap: true, url, host, port, tls } for a plain URL — unscoped,
// accepted as such and never as a module's credential — and otherwise
// { bootstrap: false, url, fingerprint, node, module, user, pass, host,
// port, inbox, tls }.
export function parseCredential(text) {
  const s = String(text).trim();
  if (s === '') throw new CredentialError('empty');
  if (!s.startsWith('{')) {
    let url = s;
    if (s.startsWith('"')) {
      try {
        url = JSON.parse(s);
      } catch (err) {
        throw new CredentialError(`bootstrap url: ${err.message}`);
      }
      if (typeof url !== 'string') throw new CredentialError('bootstrap url: not a string');
    }
    return { bootstrap: true, ...parseURL(url, 'bootstrap url') };
  }
  let doc;
  try {
    doc = JSON.parse(s);
  } catch (err) {
    throw new CredentialError(`not a JSON document nor a URL: ${err.message}`);
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) throw new CredentialError('not a JSON object');
  for (const name of Object.keys(doc)) {
    if (name === 'principal' && (doc.principal === '' || doc.principal === undefined)) continue;
    if (name === 'principal') throw new CredentialError(`field principal: ${JSON.stringify(doc.principal)}: this SDK reads a module's credential, and a module's has no principal`);
    if (!FIELDS.includes(name)) throw new CredentialError(`unknown field ${JSON.stringify(name)}`);
    if (typeof doc[name] !== 'string') throw new CredentialError(`field ${name}: want a string`);
  }
  if (!doc.url) throw new CredentialError('field url is missing');
  const u = parseURL(doc.url, 'field url');
  if (!u.user) throw new CredentialError(`field url: ${redact(doc.url)}: no user (want ${URL_FORM})`);
  if (!u.pass) throw new CredentialError(`field url: ${redact(doc.url)}: no password (want ${URL_FORM})`);
  if (!doc.fingerprint) throw new CredentialError('field fingerprint is missing');
  if (!/^[0-9a-f]{64}$/.test(doc.fingerprint)) throw new CredentialError(`field fingerprint: want 64 lower-case hex digits, got ${JSON.stringify(doc.fingerprint)}`);
  for (const f of ['node', 'module']) {
    if (!doc[f]) throw new CredentialError(`field ${f} is missing`);
    const bad = checkName(doc[f]);
    if (bad) throw new CredentialError(`field ${f}: ${bad}`);
  }
  const want = moduleUser(doc.node, doc.module);
  if (u.user !== want) {
    throw new CredentialError(`field url: user ${JSON.stringify(u.user)} is not module ${JSON.stringify(doc.module)} on node ${JSON.stringify(doc.node)} (want ${JSON.stringify(want)})`);
  }
  return {
    bootstrap: false,
    ...u,
    fingerprint: doc.fingerprint,
    node: doc.node,
    module: doc.module,
    inbox: moduleInbox(doc.node, doc.module),
    // A scoped credential pins a certificate, so it is TLS whatever its
    // scheme: CONNECT is never written in the clear.
    tls: true,
  };
}

// parseURL reads a bus URL: tls:// or nats://, a host, a port in range.
// This SDK speaks NATS only; an amqps:// credential is for the Go SDK's
// AMQP binding.
function parseURL(s, what) {
  const shown = redact(s);
  const m = /^([a-z]+):\/\/(?:([^@/]*)@)?([^@/?#]*)([/?#].*)?$/i.exec(s);
  if (!m) throw new CredentialError(`${what}: want ${URL_FORM} (no scheme:// found)`);
  const [, scheme, userinfo, hostport, tail] = m;
  if (scheme === 'amqp' || scheme === 'amqps') throw new CredentialError(`${what}: ${shown}: scheme ${scheme}: this SDK speaks NATS only (tls or nats)`);
  if (scheme !== 'tls' && scheme !== 'nats') throw new CredentialError(`${what}: ${shown}: scheme ${JSON.stringify(scheme)} is not one of tls, nats`);
  if (tail && tail !== '/') throw new CredentialError(`${what}: ${shown}: a bus URL has no path, query or fragment`);
  const hp = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::(\d*))?$/i.exec(hostport);
  if (!hp || hp[1] === '') throw new CredentialError(`${what}: ${shown}: no host`);
  if (hp[2] === '') throw new CredentialError(`${what}: ${shown}: empty port`);
  const port = hp[2] === undefined ? 4222 : Number(hp[2]);
  if (!(port >= 1 && port <= 65535)) throw new CredentialError(`${what}: ${shown}: port ${hp[2]} out of range`);
  let user = '';
  let pass = '';
  if (userinfo !== undefined) {
    const colon = userinfo.indexOf(':');
    try {
      user = decodeURIComponent(colon < 0 ? userinfo : userinfo.slice(0, colon));
      pass = colon < 0 ? '' : decodeURIComponent(userinfo.slice(colon + 1));
    } catch {
      throw new CredentialError(`${what}: ${shown}: the user and password are not valid in a URL (reserved characters must be percent-encoded)`);
    }
  }
  const host = hp[1].replace(/^\[|\]$/g, '');
  return { url: s, scheme, host, port, user, pass, server: `${scheme}://${hp[1]}:${port}` };
}
