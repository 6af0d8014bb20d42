package wire

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
)

func TestOnlyAnInboxIsAnsweredOn(t *testing.T) {
	for reply, ok := range map[string]bool{
		ModuleInbox("node-a", "logger") + ".AbC.1":     true,
		PersonInbox("alice") + ".nuid":                 true,
		EnrolInbox("tok") + ".x":                       true,
		ControllerInbox + ".a.b":                       true,
		NodeDeclare("node-b"):                          false,
		EventSubject("catalog", "provisioner.failing"): false,
		SubjectEnrol:                                   false,
		"_INBOX.x":                                     false, // names no principal
		"_INBOX.a.b":                                   false,
		"_INBOX.a.b.>":                                 false,
		"_INBOX.a.*.c":                                 false,
		"_INBOX.a..c":                                  false,
		"_INBOXES.a.b.c":                               false,
		"":                                             false,
	} {
		err := CheckInboxReply(reply)
		if (err == nil) != ok {
			t.Errorf("CheckInboxReply(%q) = %v, expected ok=%v", reply, err, ok)
		}
		if err != nil && !errors.Is(err, ErrReplySubject) {
			t.Errorf("CheckInboxReply(%q): expected ErrReplySubject, got %v", reply, err)
		}
	}
}

func TestAnEnrolmentIsAnsweredOnlyInItsTokensInbox(t *testing.T) {
	if err := CheckEnrolReply("tok-a", EnrolInbox("tok-a")+".r1"); err != nil {
		t.Fatalf("own inbox refused: %v", err)
	}
	for _, reply := range []string{
		EnrolInbox("tok-b") + ".r1",  // another token's
		EnrolInbox("tok-ab") + ".r1", // a prefix of the name is not the name
		EnrolInbox("tok-a"),          // the prefix itself
		NodeDeclare("node-b"),        // no inbox at all
		EnrolInbox("tok-a") + ".>",   // a wildcard
	} {
		if err := CheckEnrolReply("tok-a", reply); !errors.Is(err, ErrReplySubject) {
			t.Errorf("CheckEnrolReply(tok-a, %q): expected ErrReplySubject, got %v", reply, err)
		}
	}
}

func TestADirectReplyToIsTheOnlyAMQPReply(t *testing.T) {
	if err := CheckDirectReplyTo(DirectReplyTo + ".g1h2AA5yb"); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{DirectReplyTo, DirectReplyTo + ".", "node-b.logger.events", "amq.rabbitmq.reply-tox.y"} {
		if err := CheckDirectReplyTo(r); !errors.Is(err, ErrReplySubject) {
			t.Errorf("CheckDirectReplyTo(%q): expected ErrReplySubject, got %v", r, err)
		}
	}
}

func TestOnlyTheControllersDeclarationForThatSubjectVerifies(t *testing.T) {
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	otherPub, other, _ := ed25519.GenerateKey(nil)
	_ = otherPub
	d := Declaration{Node: "node-b", Modules: []string{"logger"}}
	body, sig, err := SignDeclaration(key, d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := VerifyDeclaration(pub, NodeDeclare("node-b"), body, sig)
	if err != nil || got.Node != "node-b" || len(got.Modules) != 1 {
		t.Fatalf("the genuine declaration: %+v, %v", got, err)
	}
	aBody, aSig, _ := SignDeclaration(key, Declaration{Node: "node-a"})
	_, forgedSig, _ := SignDeclaration(other, d)
	for name, c := range map[string]struct {
		subject   string
		body      []byte
		signature string
	}{
		"a PubAck":                           {NodeDeclare("node-b"), []byte(`{"stream":"CONTROL","seq":7}`), ""},
		"a status message":                   {NodeDeclare("node-b"), nil, ""},
		"another node's, copied here":        {NodeDeclare("node-b"), aBody, aSig},
		"signed by another key":              {NodeDeclare("node-b"), body, forgedSig},
		"a body changed after signing":       {NodeDeclare("node-b"), []byte(strings.Replace(string(body), "logger", "sensor", 1)), sig},
		"the genuine one on another subject": {NodeDeclare("node-a"), body, sig},
		"a signature that is not base64":     {NodeDeclare("node-b"), body, "!!"},
	} {
		if _, err := VerifyDeclaration(pub, c.subject, c.body, c.signature); !errors.Is(err, ErrDeclaration) {
			t.Errorf("%s: expected ErrDeclaration, got %v", name, err)
		}
	}
	if _, err := VerifyDeclaration(nil, NodeDeclare("node-b"), body, sig); !errors.Is(err, ErrDeclaration) {
		t.Errorf("no key: expected ErrDeclaration, got %v", err)
	}
}

func TestADeclarationKeyRoundTrips(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	got, err := DecodeDeclarationKey(EncodeDeclarationKey(pub))
	if err != nil || !got.Equal(pub) {
		t.Fatalf("round trip: %v %v", got, err)
	}
	for _, bad := range []string{"", "AAAA", "not base64!"} {
		if _, err := DecodeDeclarationKey(bad); !errors.Is(err, ErrBadCredential) {
			t.Errorf("DecodeDeclarationKey(%q): expected ErrBadCredential, got %v", bad, err)
		}
	}
}

func TestEveryStreamIsInTheAccountTheControlPlaneNeeds(t *testing.T) {
	for stream, acct := range map[string]string{
		StreamControl: AccountControl, StreamNodes: AccountControl, StreamBuilds: AccountControl,
		StreamEvents: AccountMesh, StreamDead: AccountMesh,
	} {
		if got := StreamAccount(stream); got != acct {
			t.Errorf("StreamAccount(%s) = %s, expected %s", stream, got, acct)
		}
	}
}

// TestOnlyTheServersReplyOrTheBuildersInboxIsAnsweredOn: the controller
// answers a credential request only on a reply the server made for a
// service import, and a repository a fetch only under the builder's
// inbox.
func TestOnlyTheServersReplyOrTheBuildersInboxIsAnsweredOn(t *testing.T) {
	for reply, ok := range map[string]bool{
		"_R_.abc.DEF":                 true,
		"_R_.":                        false,
		"_R_.a.>":                     false,
		HostInbox("node-a") + ".x":    false,
		NodeDeclare("node-b"):         false,
		"_R_x":                        false,
		ArtifactChunk(Digest(nil), 0): false,
		"":                            false,
	} {
		if err := CheckServiceReply(reply); (err == nil) != ok || err != nil && !errors.Is(err, ErrReplySubject) {
			t.Errorf("CheckServiceReply(%q) = %v, expected ok=%v", reply, err, ok)
		}
	}
	for reply, ok := range map[string]bool{
		BuilderInbox + ".nuid.1":      true,
		BuilderInbox + ".>":           false,
		HostInbox("node-a") + ".x":    false,
		ArtifactChunk(Digest(nil), 0): false,
		"_R_.abc":                     false,
	} {
		if err := CheckBuilderReply(reply); (err == nil) != ok || err != nil && !errors.Is(err, ErrReplySubject) {
			t.Errorf("CheckBuilderReply(%q) = %v, expected ok=%v", reply, err, ok)
		}
	}
}

// TestBuildMessageIDsAreKeyed: an announcement's and an outcome's ids
// are the same for the same key and build (a retry is a duplicate), and
// differ with the key, the build and the kind.
func TestBuildMessageIDsAreKeyed(t *testing.T) {
	b := BuildID("modules", "sensor", "r2")
	if SourceChangeMsgID("k", b) != SourceChangeMsgID("k", b) || BuiltMsgID("k", b) != BuiltMsgID("k", b) {
		t.Fatal("the same key and build give different ids")
	}
	ids := map[string]bool{}
	for _, id := range []string{
		SourceChangeMsgID("k", b), SourceChangeMsgID("other", b), SourceChangeMsgID("", b),
		BuiltMsgID("k", b), BuiltMsgID("other", b), SourceChangeMsgID("k", BuildID("modules", "sensor", "r3")),
		"changed:" + b, "built:" + b,
	} {
		if ids[id] {
			t.Errorf("id %q given twice", id)
		}
		ids[id] = true
	}
	if !strings.HasPrefix(SourceChangeMsgID("k", b), "changed:"+b+":") {
		t.Errorf("an announcement's id does not name its build: %q", SourceChangeMsgID("k", b))
	}
}
