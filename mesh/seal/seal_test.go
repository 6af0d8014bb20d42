package seal

import (
	"bytes"
	"errors"
	"testing"
)

func TestSealedOpensOnlyWithItsKey(t *testing.T) {
	k, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte(`{"url":"tls://host.node-a:secret@nats:4222"}`)
	sealed, err := To(k.Public, msg)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("secret")) {
		t.Fatal("the sealed box shows its content")
	}
	got, err := k.Open(sealed)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("open with its key: %q, %v", got, err)
	}
	if _, err := other.Open(sealed); !errors.Is(err, ErrOpen) {
		t.Errorf("opened with another key: %v", err)
	}
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	if _, err := k.Open(tampered); !errors.Is(err, ErrOpen) {
		t.Errorf("a changed box opened: %v", err)
	}
	if _, err := k.Open(sealed[:10]); !errors.Is(err, ErrOpen) {
		t.Errorf("a cut box opened: %v", err)
	}
}

func TestPublicKeyRoundTrips(t *testing.T) {
	k, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParsePublic(EncodePublic(k.Public))
	if err != nil || *got != *k.Public {
		t.Fatalf("round trip: %v", err)
	}
	for _, bad := range []string{"", "short", EncodePublic(k.Public) + "AA", "!!!"} {
		if _, err := ParsePublic(bad); err == nil {
			t.Errorf("%q was read as a key", bad)
		}
	}
}

func TestAKeyIsKeptAndReadBack(t *testing.T) {
	k, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseKey(k.Marshal())
	if err != nil || *got.Public != *k.Public || *got.Private != *k.Private {
		t.Fatalf("round trip: %v", err)
	}
	other, _ := NewKey()
	mixed := Key{Public: other.Public, Private: k.Private}
	if _, err := ParseKey(mixed.Marshal()); err == nil {
		t.Error("a key file whose halves do not belong together was read")
	}
	if _, err := ParseKey([]byte(`{"public":"x"}`)); err == nil {
		t.Error("a key file without a key was read")
	}
}
