// Package wire spells the mesh's wire: subjects, stream and consumer
// names, user names, inbox prefixes, envelope headers and the credential
// document. It is the only place in the project where these strings are
// written out; every other package derives them from here, so that a
// subject cannot drift between the composer that grants it and the client
// that uses it (design 25 §2–§4, design 19).
package wire
