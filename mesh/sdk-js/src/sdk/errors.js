// The SDK's errors: what a caller branches on. A module's driver names
// each with the conformance protocol's class (docs/conformance.md).

export { CredentialError } from './credential.js';
export { FingerprintError } from '../nats/socket.js';
export { NoRespondersError, TimeoutError } from '../nats/client.js';

// BootstrapError: the credential is a bootstrap URL — unscoped, for the
// moment before a mesh can issue anything, and never a module's.
export class BootstrapError extends Error {
  constructor() {
    super('the credential is a bootstrap URL, not a module\'s credential: a module connects with the document its host was given');
    this.name = 'BootstrapError';
  }
}

// InvalidError: what the caller asked for is not valid (a key, a body, a
// header over its limit), refused before anything is sent.
export class InvalidError extends Error {
  constructor(message) {
    super(message);
    this.name = 'InvalidError';
  }
}

// NoConsumerError: the module's consumer does not exist — a mesh that has
// not finished assigning the module, not something for it to fix: it
// creates nothing on the bus.
export class NoConsumerError extends Error {
  constructor(consumer, why) {
    super(`no consumer ${consumer} on stream EVENTS: ${why}`);
    this.name = 'NoConsumerError';
  }
}

// DeniedError: the server refused what this account has no grant for.
export class DeniedError extends Error {
  constructor(message) {
    super(message);
    this.name = 'DeniedError';
  }
}

// ClosedError: the module was closed.
export class ClosedError extends Error {
  constructor() {
    super('the module is closed');
    this.name = 'ClosedError';
  }
}
