package wire

import (
	"errors"
	"fmt"
	"strings"
)

// ErrReplySubject is wrapped by every refusal of a reply subject.
var ErrReplySubject = errors.New("reply subject refused")

// CheckInboxReply reports whether reply is one a responder may answer: a
// concrete subject under some principal's inbox prefix (_INBOX.<a>.<b>.
// and at least one more token). nats-server never checks a reply subject
// against the requester's grants, and allow_responses lets the responder
// publish once to whatever it names, so a responder that answered any
// reply would write wherever its caller pointed it: into a stream, as
// another module's event. No stream captures _INBOX.>, and every inbox
// prefix is one principal's (ModuleInbox, PersonInbox …), so an answer
// under one can only ever reach a caller.
func CheckInboxReply(reply string) error {
	rest, ok := strings.CutPrefix(reply, inbox+".")
	if !ok {
		return fmt.Errorf("%w: %q is not under %s", ErrReplySubject, reply, Under(inbox))
	}
	toks := strings.Split(rest, ".")
	if len(toks) < 3 {
		return fmt.Errorf("%w: %q names no principal's inbox (want %s.<kind or module>.<name>.<token>)", ErrReplySubject, reply, inbox)
	}
	for _, t := range toks {
		if t == "" || t == "*" || t == ">" || strings.ContainsAny(t, " \t\r\n") {
			return fmt.Errorf("%w: %q is not a concrete subject", ErrReplySubject, reply)
		}
	}
	return nil
}

// CheckEnrolReply reports whether reply, taken from an enrolment request's
// payload (design 25 §2, §6), is under the inbox of the token the request
// claims. The controller answers there and nowhere else: the answer
// carries credentials, and a request naming another token's inbox, or a
// subject that is not an inbox at all, would have the controller deliver
// them (or write into a stream) on the requester's word.
func CheckEnrolReply(token, reply string) error {
	if err := CheckInboxReply(reply); err != nil {
		return err
	}
	if !strings.HasPrefix(reply, EnrolInbox(token)+".") {
		return fmt.Errorf("%w: %q is not under the inbox of token %q (%s)", ErrReplySubject, reply, token, Under(EnrolInbox(token)))
	}
	return nil
}

// serviceReply is the prefix of the reply subjects nats-server makes for
// a request that crosses a service import; a client may not name one
// (isReservedReply in server/client.go refuses it).
const serviceReply = "_R_."

// CheckServiceReply reports whether reply is one the server made for a
// request that came through a service import (from AccountHosts or
// AccountSources): an answer published there goes back to the requester,
// in its own account, and nowhere else, whatever reply the requester
// named. A responder reached only through an import answers only these.
func CheckServiceReply(reply string) error {
	rest, ok := strings.CutPrefix(reply, serviceReply)
	if !ok || rest == "" || strings.ContainsAny(rest, "*> \t\r\n") {
		return fmt.Errorf("%w: %q is not a reply the server made for a service import (%s…)", ErrReplySubject, reply, serviceReply)
	}
	return nil
}

// CheckBuilderReply reports whether reply, a fetch's, is under the
// builder's inbox: the one place a source repository answers (its grant
// allows no other in the control account), so a fetch aimed elsewhere is
// not answered at all rather than refused by the server.
func CheckBuilderReply(reply string) error {
	if err := CheckInboxReply(reply); err != nil {
		return err
	}
	if !strings.HasPrefix(reply, BuilderInbox+".") {
		return fmt.Errorf("%w: %q is not under the builder's inbox (%s)", ErrReplySubject, reply, Under(BuilderInbox))
	}
	return nil
}
