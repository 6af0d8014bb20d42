package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// maxBody caps the body kept in the result; the probe reads monitoring
// endpoints, whose answers are small, and one output line must stay sane.
const maxBody = 64 << 10

// Result is the one JSON line the probe prints.
type Result struct {
	// OK is true when the target answered: any HTTP response (whatever its
	// status), or an accepted TCP connection.
	OK bool `json:"ok"`
	// Status is the HTTP status code; 0 for tcp and when nothing answered.
	Status int `json:"status"`
	// Body is the HTTP response body, cut at 64 KiB.
	Body string `json:"body"`
	// Error says why the target did not answer; empty when OK.
	Error string `json:"error"`
	// ConnectMS is how long a tcp probe's connection took to be accepted,
	// in milliseconds, the name lookup left out: the round trip of the
	// handshake. Absent for http and when nothing answered.
	ConnectMS float64 `json:"connect_ms,omitempty"`
}

// checkTarget refuses what is a misuse of the probe rather than an
// observation of the network: an unknown kind or an unusable target.
func checkTarget(kind, target string) error {
	switch kind {
	case "http":
		u, err := url.Parse(target)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("bad url %q: want http(s)://host[:port]/path", target)
		}
	case "tcp":
		if _, _, err := net.SplitHostPort(target); err != nil {
			return fmt.Errorf("bad address %q: %w", target, err)
		}
	default:
		return fmt.Errorf("unknown probe %q: want http or tcp", kind)
	}
	return nil
}

// probeHTTP GETs rawURL once, without proxies (a probe observes the
// network it stands on, not a proxy's) and without following redirects
// (the first answer is the observation).
func probeHTTP(ctx context.Context, rawURL string) Result {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return Result{Error: err.Error()}
	}
	client := &http.Client{
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		return Result{Error: err.Error()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	res := Result{OK: true, Status: resp.StatusCode, Body: string(body)}
	if err != nil {
		res.Error = fmt.Sprintf("read body: %v", err)
	}
	return res
}

// probeTCP connects to hostport, timing the handshake alone, and closes
// the connection at once.
func probeTCP(ctx context.Context, hostport string) Result {
	host, port, _ := net.SplitHostPort(hostport) // checkTarget checked it
	addrs, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil {
		return Result{Error: err.Error()}
	}
	var d net.Dialer
	start := time.Now()
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(addrs[0], port))
	if err != nil {
		return Result{Error: err.Error()}
	}
	took := time.Since(start)
	_ = conn.Close()
	return Result{OK: true, ConnectMS: float64(took.Microseconds()) / 1000}
}
