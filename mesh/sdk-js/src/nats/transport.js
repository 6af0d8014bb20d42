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
// A dialer is (server, options) -> Promise<Transport>; node:net's is in
// socket.js.

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
    drop() {
      toClient.close();
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
