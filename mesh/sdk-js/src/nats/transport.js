// A Transport is one connection to a server as the client sees it; the
// client never touches a socket (seed 002, "The layers"), so the
// handshake, the routing and the reconnect are tested against a scripted
// server in memory, with no port (memoryPair).
//
//   write(bytes)        -> Promise, settled once the bytes are written
//   read()              -> Promise<Buffer|null>, the next chunk; null once closed
//   upgrade(tlsOptions) -> Promise, the in-band TLS upgrade: the bytes after
//                          it are the TLS session's
//   close()             -> ends it; a pending read gets null
//
// A dialer is (host, port) -> Promise<Transport>; node:net's is in
// socket.js, memoryDialer's hands out a memoryPair an attempt.

// memoryPair is a client Transport and the scripted server's end of it.
// The server end reads what the client wrote and writes what the client
// reads; upgrade() is recorded (a test checks it came before CONNECT) and
// needs nothing of TLS.
export function memoryPair() {
  const toServer = new Chunks();
  const toClient = new Chunks();
  const events = [];
  const client = {
    upgraded: false,
    async write(bytes) {
      if (toServer.closed) throw new Error('write on a closed transport');
      events.push({ write: Buffer.from(bytes) });
      toServer.put(Buffer.from(bytes));
    },
    read: () => toClient.take(),
    async upgrade(options) {
      events.push({ upgrade: options });
      client.upgraded = true;
    },
    close() {
      toServer.close();
      toClient.close();
    },
  };
  const server = {
    events,
    send(text) {
      toClient.put(Buffer.from(text, 'utf8'));
    },
    // line reads what the client wrote until it holds a line matching re,
    // skipping the lines before it, and returns that line; after a timeout
    // the end is not to be read again (the test has failed).
    async line(re, timeoutMs = 2000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const i = server.pending.indexOf('\r\n');
        if (i >= 0) {
          const line = server.pending.slice(0, i);
          server.pending = server.pending.slice(i + 2);
          if (re.test(line)) return line;
          continue;
        }
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`the client wrote no line matching ${re} within ${timeoutMs} ms`);
        let timer;
        const expired = new Promise((r) => {
          timer = setTimeout(() => r(undefined), left);
        });
        const chunk = await Promise.race([toServer.take(), expired]);
        clearTimeout(timer);
        if (chunk === null) throw new Error(`the transport closed before a line matching ${re}`);
        if (chunk !== undefined) server.pending += chunk.toString('utf8');
      }
    },
    pending: '',
    // accept plays the server's side of the handshake: INFO (info's
    // fields over a plain server's), then, once the client has written
    // CONNECT and PING, the PONG. It returns the CONNECT's options.
    async accept(info = {}) {
      server.send(`INFO ${JSON.stringify({ server_id: 'mem', version: '2.15.3', headers: true, max_payload: 1048576, ...info })}\r\n`);
      const connect = await server.line(/^CONNECT /);
      await server.line(/^PING$/);
      server.send('PONG\r\n');
      return JSON.parse(connect.slice('CONNECT '.length));
    },
    // drop loses the connection: the client's read gets null.
    drop() {
      toClient.close();
      toServer.close();
    },
    // breakWrites fails the client's writes from now on, its read still
    // waiting: a socket whose writes fail before its close is seen.
    breakWrites() {
      toServer.close();
    },
    get closed() {
      return toServer.closed;
    },
  };
  return { client, server };
}

// Chunks is a queue of buffers with one waiting reader at a time.
class Chunks {
  #queue = [];
  #waiting = null;
  closed = false;

  put(b) {
    if (this.closed) return;
    if (this.#waiting) {
      const w = this.#waiting;
      this.#waiting = null;
      w(b);
    } else {
      this.#queue.push(b);
    }
  }

  take() {
    if (this.#queue.length > 0) return Promise.resolve(this.#queue.shift());
    if (this.closed) return Promise.resolve(null);
    return new Promise((resolve) => {
      this.#waiting = resolve;
    });
  }

  close() {
    this.closed = true;
    if (this.#waiting) {
      const w = this.#waiting;
      this.#waiting = null;
      w(null);
    }
  }
}

// memoryDialer hands out a fresh memoryPair on every dial, so a test can
// drop one server and script the next. refuse, when set, is asked of
// each attempt ((host, port) -> true refuses it, as a server that is not
// listening).
export function memoryDialer() {
  const attempts = []; // { host, port, at, refused, client, server }
  const waiters = [];
  const d = {
    attempts,
    refuse: null,
    async dial(host, port) {
      const refused = Boolean(d.refuse?.(host, port));
      const a = { host, port, at: Date.now(), refused, ...memoryPair() };
      attempts.push(a);
      for (const w of waiters.splice(0)) w();
      if (refused) throw new Error(`dial ${host}:${port}: connection refused`);
      return a.client;
    },
    // attempt resolves with the n-th attempt (from 0) once it is made.
    async attempt(n, timeoutMs = 2000) {
      const deadline = Date.now() + timeoutMs;
      while (attempts.length <= n) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no dial attempt #${n} within ${timeoutMs} ms (${attempts.length} made)`);
        let timer;
        await new Promise((r) => {
          waiters.push(r);
          timer = setTimeout(r, left);
        });
        clearTimeout(timer);
      }
      return attempts[n];
    },
  };
  return d;
}
