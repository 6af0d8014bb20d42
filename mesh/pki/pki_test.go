package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

func TestServerCertificateCoversNamesAndChains(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("mesh test ca", now)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServer([]string{"nats", "localhost", "127.0.0.1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("certificate and key do not pair: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"nats", "localhost", "127.0.0.1"} {
		if err := leaf.VerifyHostname(name); err != nil {
			t.Errorf("expected the certificate to cover %q: %v", name, err)
		}
	}
	if err := leaf.VerifyHostname("elsewhere"); err == nil {
		t.Error("expected the certificate not to cover an unlisted name")
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "nats"}); err != nil {
		t.Errorf("expected the certificate to chain to its CA: %v", err)
	}

	again, err := LoadCA(ca.CertPEM, ca.KeyPEM)
	if err != nil {
		t.Fatalf("reload the CA: %v", err)
	}
	if _, _, err := again.IssueServer([]string{"nats"}, now); err != nil {
		t.Fatalf("issue from a reloaded CA: %v", err)
	}
}

func TestFingerprintIsSHA256OfDER(t *testing.T) {
	ca, err := NewCA("x", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	fp, err := Fingerprint(ca.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(ca.CertPEM)
	if want := FingerprintDER(block.Bytes); fp != want || len(fp) != 64 {
		t.Fatalf("expected %s, got %s", want, fp)
	}
	if _, err := Fingerprint([]byte("not pem")); err == nil {
		t.Fatal("expected an error for a non-PEM input")
	}
}
