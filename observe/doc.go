// Package observe looks at a running bus from outside, the way a bed must:
// through a client's connection and the server's own answers. It holds
// the logic the bed's steps call, so that unit and in-process tests can
// reach it: which operations the server refuses a principal, and what the
// server's streams and consumers are.
package observe
