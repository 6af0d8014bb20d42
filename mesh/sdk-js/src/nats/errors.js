// Errors the client raises. A ProtocolError means the bytes from the
// server are not NATS: the stream is at an unknown boundary, so the
// connection latches it and every caller, now and later, gets that one
// cause (seed 002, "Why a lost socket is recovered but a malformed stream
// is not").

export class ProtocolError extends Error {
  constructor(message) {
    super(message);
    this.name = 'ProtocolError';
  }
}

// ClosedError is the cause a client closed by close() ends with.
export class ClosedError extends Error {
  constructor() {
    super('the client was closed');
    this.name = 'ClosedError';
  }
}

// ReconnectError ends a client whose every server of the pool used up its
// reconnect attempts; cause is the last attempt's failure.
export class ReconnectError extends Error {
  constructor(attempts, cause) {
    super(`no server of the pool took a connection in ${attempts} attempts each; the last: ${cause?.message ?? 'none'}`, { cause });
    this.name = 'ReconnectError';
  }
}

// PendingOverflowError refuses a publish made while the client is
// reconnecting once what already waits for the reconnect would pass the
// bound (maxPendingWhileDownBytes).
export class PendingOverflowError extends Error {
  constructor(size, waiting, bound) {
    super(`publish of ${size} bytes refused while reconnecting: ${waiting} bytes already wait for the reconnect, and maxPendingWhileDownBytes is ${bound}`);
    this.name = 'PendingOverflowError';
  }
}

// MalformedMessageError is a message whose header block is not NATS's (a
// line without a colon, no version line, a status that is not three
// digits). The server forwards whatever block a publisher sends, and the
// message's byte counts framed it, so the stream is still at a known
// boundary: the fault is that one message's, never the connection's. The
// message is delivered with it as its malformed field; a request answered
// by one fails with it.
export class MalformedMessageError extends Error {
  constructor(message) {
    super(message);
    this.name = 'MalformedMessageError';
  }
}
