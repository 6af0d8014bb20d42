// Package sdkjs holds the mesh's module SDK in JavaScript (design 19: the
// floor and events, a partial SDK) on its own core-NATS client, written
// as seed 002 describes, for Node.js 18 and later with no dependencies.
// The Go side is only the tests that run its suites (node --test) and its
// conformance driver within go test, so the README's test command and CI
// run them too; docs/sdk-js.md is the SDK's page.
//
// Layout: src/nats/ the client (the command boundary, the handshake with
// the in-band TLS upgrade, the protocol's chatter, serialised writes,
// -ERR as the protocol's table says, capped subscriptions,
// request/reply, reconnection through the server pool, and the socket
// Transport with the leaf's sha256 pinned); src/sdk/ the SDK (the wire
// of design 19, the credential, publish, the pull consumer); driver/ the
// conformance driver (docs/conformance.md); test/ the node:test suites,
// the unit ones with bytes alone (no socket, no port), test/e2e/ against
// the real nats-server, which this package's Go test starts in-process
// with the sample mesh's composed configuration, streams and consumers
// and hands to the suite (MESH_E2E).
package sdkjs
