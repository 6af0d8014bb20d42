// The server pool (seed 002, "Reconnection"): the servers the caller
// named, first one first, then those a server announces in INFO's
// connect_urls, each once. TLS is the client's, not a server's: a tls://
// URL anywhere in the list means TLS on every server, discovered ones
// too, since connect_urls say nothing of it ("TLS is also never lost on a
// reconnect").

const DEFAULT_PORT = 4222;

// parseServer reads a nats:// or tls:// URL, or a connect_urls entry
// (host:port, no scheme), into { host, port, tls, key }.
export function parseServer(s, { discovered = false } = {}) {
  if (typeof s !== 'string' || s === '') throw new TypeError(`server ${JSON.stringify(s)}: a nats:// or tls:// URL`);
  const text = discovered && !/^[a-z]+:\/\//i.test(s) ? `nats://${s}` : s;
  let u;
  try {
    u = new URL(text);
  } catch {
    throw new TypeError(`server ${JSON.stringify(s)}: not a URL`);
  }
  if (u.protocol !== 'nats:' && u.protocol !== 'tls:') throw new TypeError(`server ${JSON.stringify(s)}: the scheme is nats:// or tls://, not ${u.protocol}//`);
  // A password in a URL ends up in logs and status events; the
  // credential is given as options.
  if (u.username || u.password) throw new TypeError(`server ${JSON.stringify(s)}: give user and pass as options, not in the URL`);
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
  if (!host) throw new TypeError(`server ${JSON.stringify(s)}: no host`);
  const port = u.port ? Number(u.port) : DEFAULT_PORT;
  const key = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  return { host, port, tls: u.protocol === 'tls:', key, url: `${u.protocol}//${key}`, discovered };
}

// Pool holds the servers in the order they are tried. Each carries its
// own count of failed attempts since it was last connected to and the
// time of its last attempt (the wait between attempts is per server, so
// a pool of several moves on to the next at once).
export class Pool {
  #servers = [];

  constructor(urls) {
    if (!Array.isArray(urls) || urls.length === 0) throw new TypeError('servers: at least one nats:// or tls:// URL');
    for (const u of urls) this.#add(parseServer(u));
    this.tls = this.#servers.some((s) => s.tls);
    this.first = this.#servers[0];
  }

  #add(s) {
    if (this.#servers.some((o) => o.key === s.key)) return false;
    this.#servers.push({ ...s, attempts: 0, lastAttempt: 0 });
    return true;
  }

  // learn adds the servers of an INFO's connect_urls not yet known; an
  // entry that is not host:port is skipped (the server's, not ours).
  learn(connectUrls) {
    let added = 0;
    for (const entry of connectUrls ?? []) {
      try {
        if (this.#add(parseServer(entry, { discovered: true }))) added++;
      } catch {
        // not an address: nothing to dial
      }
    }
    return added;
  }

  get servers() {
    return this.#servers.slice();
  }

  get size() {
    return this.#servers.length;
  }

  // after returns the server to try after s (the next in the pool,
  // round), or the first when s is not in it.
  after(s) {
    const i = this.#servers.indexOf(s);
    return this.#servers[(i + 1) % this.#servers.length];
  }

  remove(s) {
    const i = this.#servers.indexOf(s);
    if (i >= 0) this.#servers.splice(i, 1);
  }
}
