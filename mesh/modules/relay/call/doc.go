// Package call is the relay's tool, call: its request and answer, how an
// error of the SDK becomes an outcome, and the latency summary. It is
// importable so that a bed's steps make and read the relay's calls with
// the same types the relay uses.
//
// The relay is a deputy. It calls another module's tool on its own
// account, so whoever may call relay.call acts with relay's grant, not
// its own: that is the point of the sample — the test of what a module's
// grant allows is made by that module, and the server's verdict
// (answered, or refused as a permissions violation, sdk.ErrDenied) is
// reported back as it came — and it is why a mesh grants relay.call to
// its administrators only. The same program runs as "relay", whose
// manifest uses the tools under test, and as "stranger", whose manifest
// uses nothing.
package call
