// Command predecessor is the beds' stand-in for the predecessor's client
// (design 25 §5, §9 step 5): a client of the AMQP broker the mesh had,
// with its own user and its own virtual host, which the mesh never mints
// or changes. While the mesh adopts the NATS server and moves to it, this
// client must notice nothing: it publishes sequence-numbered messages at
// a steady rate with publisher confirms and consumes them back, asks its
// own responder through direct reply-to, and counts everything it could
// notice (report.Counts), which it serves as JSON for the steps to read
// from outside.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/meshbus/mesh/stand-ins/predecessor/report"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `predecessor is the beds' stand-in for the predecessor's AMQP client.

Usage:
  predecessor --url-file FILE [--name N] [--listen ADDR] [--rate R]
              [--call-rate R] [--call-timeout D] [--retry D]

FILE holds one amqp:// or amqps:// URL naming the predecessor's own user,
password and virtual host. It keeps one connection, named N (default
predecessor), for its whole life unless the broker closes it, and then
dials again after --retry (default 1s), counting the disconnect with the
broker's reason. Over it, in its own virtual host, it declares the topic
exchange legacy.events, the queue legacy.readings bound to it and the
queue legacy.rpc; it publishes R messages a second (default 20), each a
sequence number, persistent and mandatory, with publisher confirms, and
consumes them back; and it asks legacy.rpc --call-rate times a second
(default 5) through direct reply-to, counting a call unanswered after
--call-timeout (default 2s) as timed out. Its counts are served as JSON
at http://ADDR/counts (default :8080); /ready answers 200 while a
connection is open, 503 otherwise.

Exit status: 0 stopped by SIGTERM or SIGINT (or help); 1 the URL file or
the listener failed; 2 bad usage.
`

// run is main with its outside world passed in; it returns the exit
// status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("predecessor", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	urlFile := fs.String("url-file", "", "")
	listen := fs.String("listen", ":8080", "")
	cfg := config{}
	fs.StringVar(&cfg.name, "name", "predecessor", "")
	fs.Float64Var(&cfg.rate, "rate", 20, "")
	fs.Float64Var(&cfg.callRate, "call-rate", 5, "")
	fs.DurationVar(&cfg.callTimeout, "call-timeout", 2*time.Second, "")
	fs.DurationVar(&cfg.retry, "retry", time.Second, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprintf(stderr, "predecessor: %v\n\n%s", err, usage)
		return 2
	}
	var bad []string
	if *urlFile == "" {
		bad = append(bad, "--url-file is required")
	}
	if fs.NArg() > 0 {
		bad = append(bad, fmt.Sprintf("unexpected arguments %q", fs.Args()))
	}
	if !(cfg.rate > 0) || !(cfg.callRate > 0) {
		bad = append(bad, fmt.Sprintf("--rate %v and --call-rate %v must be above 0", cfg.rate, cfg.callRate))
	}
	if cfg.callTimeout <= 0 || cfg.retry <= 0 {
		bad = append(bad, fmt.Sprintf("--call-timeout %v and --retry %v must be above 0", cfg.callTimeout, cfg.retry))
	}
	if cfg.name == "" {
		bad = append(bad, "--name is empty")
	}
	if len(bad) > 0 {
		fmt.Fprintf(stderr, "predecessor: %s\n\n%s", strings.Join(bad, "; "), usage)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))

	raw, err := os.ReadFile(*urlFile)
	if err != nil {
		fmt.Fprintf(stderr, "predecessor: read the URL: %v\n", err)
		return 1
	}
	cfg.url = strings.TrimSpace(string(raw))
	user, vhost, err := identity(cfg.url)
	if err != nil {
		fmt.Fprintf(stderr, "predecessor: %s: %v\n", *urlFile, err)
		return 1
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "predecessor: listen: %v\n", err)
		return 1
	}
	p := newPredecessor(cfg, user, vhost, log)
	srv := &http.Server{Handler: p.handler(), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	log.Info("predecessor: serving its counts", "addr", ln.Addr().String())
	if err := p.run(ctx); err != nil {
		fmt.Fprintf(stderr, "predecessor: %v\n", err)
		return 1
	}
	return 0
}

// identity is the user and virtual host an AMQP URL names.
func identity(raw string) (user, vhost string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("not a URL")
	}
	if u.Scheme != "amqp" && u.Scheme != "amqps" {
		return "", "", fmt.Errorf("scheme %q: want amqp or amqps", u.Scheme)
	}
	if u.User == nil || u.User.Username() == "" || u.Host == "" {
		return "", "", fmt.Errorf("the URL names no user or no host")
	}
	vhost = strings.TrimPrefix(u.Path, "/")
	if vhost == "" {
		vhost = "/"
	}
	return u.User.Username(), vhost, nil
}

// handler serves the counts and readiness.
func (p *predecessor) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+report.Path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(p.snapshot())
	})
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		if !p.connected() {
			http.Error(w, "not connected", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "connected")
	})
	return mux
}
