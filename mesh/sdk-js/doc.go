// Package sdkjs holds the mesh's module SDK in JavaScript (design 19: the
// floor and events, a partial SDK) on its own core-NATS client, written
// as seed 002 describes, for Node.js 20 and later with no dependencies.
// The Go side is only the test that runs its suites (node --test) within
// go test, so the README's test command and CI run them too.
//
// Layout: src/nats/ the client (parser.js the command boundary,
// headers.js the header block), test/ its node:test suites.
package sdkjs
