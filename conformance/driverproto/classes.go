package driverproto

// Class is an implementation's reading of what went wrong, carried by a
// failed done line. The bed compares classes, so every language spells
// them the same.
type Class string

// The error classes, a closed set.
const (
	// ClassFingerprint: the bus presented another certificate than the
	// pinned one.
	ClassFingerprint Class = "fingerprint"
	// ClassCredential: the credential file was refused (the message names
	// the field).
	ClassCredential Class = "credential"
	// ClassBootstrap: the credential is a bootstrap URL.
	ClassBootstrap Class = "bootstrap"
	// ClassNoConsumer: the module's consumer does not exist.
	ClassNoConsumer Class = "no_consumer"
	// ClassDenied: the bus refused what the account has no grant for.
	ClassDenied Class = "denied"
	// ClassTool: the tool's handler failed (the message is the handler's).
	ClassTool Class = "tool"
	// ClassNoResponders: nobody serves the tool.
	ClassNoResponders Class = "no_responders"
	// ClassTimeout: no answer in time.
	ClassTimeout Class = "timeout"
	// ClassOther: anything else.
	ClassOther Class = "other"
)

// Classes lists every class, in the order the document gives them.
var Classes = []Class{
	ClassFingerprint, ClassCredential, ClassBootstrap, ClassNoConsumer, ClassDenied,
	ClassTool, ClassNoResponders, ClassTimeout, ClassOther,
}

// The exit statuses of a driver. Any other status is a driver that broke.
const (
	// ExitRan: the command ran, whatever the bus answered; the answer is
	// in the output, which ends with a done line. Asking for help (help,
	// -h, --help, alone or after a command) also exits ExitRan, with the
	// usage on standard output and no line.
	ExitRan = 0
	// ExitUsage: bad usage; nothing on standard output.
	ExitUsage = 2
	// ExitUnsupported: the implementation does not implement the
	// command's capability; nothing on standard output.
	ExitUnsupported = 3
)

// Exits lists every exit status, in the order the document gives them.
var Exits = []int{ExitRan, ExitUsage, ExitUnsupported}
