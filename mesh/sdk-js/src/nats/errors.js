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
