package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// probe runs the program and decodes its one output line.
func probe(t *testing.T, args ...string) Result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("%q: expected exit 0, got %d (stderr %q)", args, code, stderr.String())
	}
	if n := strings.Count(stdout.String(), "\n"); n != 1 {
		t.Fatalf("%q: expected one output line, got %d: %q", args, n, stdout.String())
	}
	var r Result
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("%q: output is not a result: %v: %q", args, err, stdout.String())
	}
	return r
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestHTTPAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"<unavailable>"}`))
	}))
	defer srv.Close()

	r := probe(t, "http", srv.URL+"/healthz")
	want := Result{OK: true, Status: 503, Body: `{"status":"<unavailable>"}`}
	if r != want {
		t.Fatalf("expected %+v, got %+v", want, r)
	}
}

func TestHTTPBodyIsCapped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte("x"), 2*maxBody))
	}))
	defer srv.Close()
	if r := probe(t, "http", srv.URL); !r.OK || len(r.Body) != maxBody {
		t.Fatalf("expected ok with a %d-byte body, got ok=%v len=%d", maxBody, r.OK, len(r.Body))
	}
}

func TestHTTPRefused(t *testing.T) {
	r := probe(t, "http", "http://"+closedAddr(t)+"/varz")
	if r.OK || r.Status != 0 || !strings.Contains(r.Error, "refused") {
		t.Fatalf("expected a refused connection, got %+v", r)
	}
}

func TestHTTPTimeout(t *testing.T) {
	// Accepts the connection and never answers, like a black-holed port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	start := time.Now()
	r := probe(t, "--timeout=200ms", "http", "http://"+l.Addr().String()+"/")
	if r.OK || r.Error == "" {
		t.Fatalf("expected a timeout, got %+v", r)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("expected the probe to give up near its 200ms timeout, took %v", took)
	}
}

func TestTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if r := probe(t, "tcp", l.Addr().String()); !r.OK || r.Error != "" || r.ConnectMS <= 0 || r.ConnectMS > 1000 {
		t.Fatalf("expected ok and the connect's time for a listening port, got %+v", r)
	}
	if r := probe(t, "tcp", closedAddr(t)); r.OK || !strings.Contains(r.Error, "refused") {
		t.Fatalf("expected refused for a closed port, got %+v", r)
	}
}

func TestBadUsage(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"http"},
		{"udp", "127.0.0.1:1"},
		{"http", "127.0.0.1:8222/varz"},
		{"tcp", "127.0.0.1"},
		{"--timeout=0s", "tcp", "127.0.0.1:1"},
		{"--bogus", "tcp", "127.0.0.1:1"},
		{"tcp", "127.0.0.1:1", "extra"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("%q: expected exit 2, got %d", args, code)
		}
		if stdout.Len() != 0 {
			t.Errorf("%q: expected no result line on bad usage, got %q", args, stdout.String())
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}} {
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), args, &stdout, &stderr); code != 0 {
			t.Errorf("%q: expected exit 0, got %d", args, code)
		}
		if !strings.Contains(stdout.String()+stderr.String(), "mesh-probe [flags] http URL") {
			t.Errorf("%q: expected the usage, got %q", args, stdout.String()+stderr.String())
		}
	}
}
