package testutil

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echo serves a line-echo on loopback until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, line string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	return got[:len(got)-1], nil
}

func TestProxyForwardsCutsAndRestores(t *testing.T) {
	p := NewProxy(t, echo(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(c, "hello"); err != nil || got != "hello" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}

	p.Cut()
	if _, err := roundTrip(c, "after the cut"); err == nil {
		t.Fatal("a connection the proxy cut still carries data")
	}
	refused, err := net.Dial("tcp", p.Addr())
	if err == nil {
		if _, err := roundTrip(refused, "while cut"); err == nil {
			t.Fatal("a connection made while cut carries data")
		}
		refused.Close()
	}
	if p.Refused() != 1 {
		t.Fatalf("refused %d connections while cut, want 1", p.Refused())
	}

	p.Restore()
	again, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got, err := roundTrip(again, "back"); err != nil || got != "back" {
		t.Fatalf("after restore: %q, %v", got, err)
	}
}
