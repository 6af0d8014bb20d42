// Package sdkjs holds the mesh's module SDK in JavaScript (design 19: the
// floor and events, a partial SDK) on its own core-NATS client, written
// as seed 002 describes, for Node.js 20 and later with no dependencies.
// The Go side is only the test that runs its suites (node --test) within
// go test, so the README's test command and CI run them too.
//
// Layout: src/nats/ the client — parser.js the command boundary,
// headers.js the header block, transport.js the Transport a connection
// runs over (and memoryPair, the scripted server's end, for tests with no
// socket), connection.js the handshake (INFO, the in-band TLS upgrade,
// CONNECT and PING, up at the PONG), the server's PING answered, PONGs
// matched in order, writes serialised, -ERR as the protocol's table says;
// client.js publish (PUB, HPUB), subscriptions delivered one at a time and
// capped (drops counted, said once per run), request/reply on an inbox
// under the credential's prefix with a 503 as no responders; socket.js
// the Transport over node:net with the in-band TLS upgrade, the leaf's
// sha256 pinned and its name checked before CONNECT — and test/ its
// node:test suites: the unit ones with bytes alone (no socket, no port),
// test/e2e/ against the real nats-server, which this package's Go test
// starts in-process with the sample mesh's composed configuration and
// hands to the suite (MESH_E2E). Still to come (issue 11): reconnection
// through the server pool, keepalive, the SDK, its conformance driver,
// the benchmarks.
package sdkjs
