package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/meshbus/mesh/cmd/mesh-nats/internal/watch"
)

// supervise runs the child until it exits and returns the status to exit
// with. It never returns while the child runs.
func supervise(o options, stdout, stderr io.Writer, log *slog.Logger) int {
	// Subscribe before starting the child so a stop request arriving during
	// start-up is queued and forwarded rather than killing us alone.
	// TERM and INT stop the child; HUP lets an operator force a reload
	// (`docker kill -s HUP`) and a re-check of the watched file; USR1
	// reopens nats-server's log files and USR2 puts it in lame-duck mode.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)

	var cmd *exec.Cmd
	a := newApplier(o, func() error {
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			log.Error("reload failed", "pid", cmd.Process.Pid, "err", err)
			return err
		}
		return nil
	}, log)
	w, err := watch.New(watch.Options{
		Path:     o.config,
		Interval: o.poll,
		Logger:   log,
		Notify:   a.change,
	})
	if err != nil {
		log.Error("start watcher", "err", err)
		return 1
	}
	// Take the baseline before the server reads anything, so a change
	// made while it starts is seen as a change; and check exactly the
	// bytes taken. A server started on a torn or open configuration would
	// serve an open bus, so there is no server until the file is good.
	content, err := w.Prime()
	if err == nil {
		err = a.start(context.Background(), content)
	}
	if err != nil {
		msg := "configuration refused at start; not starting the server"
		if !refusal(err) {
			msg = "configuration not checked at start; not starting the server"
		}
		log.Error(msg, "path", o.config, "reason", err.Error())
		return 1
	}

	cmd = exec.Command(o.server, append([]string{"-c", a.applied()}, o.childArgs...)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		log.Error("start child", "server", o.server, "err", err)
		return 1
	}
	pidFile := filepath.Join(o.runDir, PIDFile)
	if err := writePID(o.runDir, cmd.Process.Pid); err != nil {
		// Only `mesh-nats signal` needs it; the bus serves without.
		log.Warn("write the server's pid file", "path", pidFile, "err", err)
	}
	defer os.Remove(pidFile)
	log.Info("started child", "pid", cmd.Process.Pid, "server", o.server, "args", cmd.Args[1:],
		"config", o.config, "hash", short(w.Hash()), "poll", o.poll.String())

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// The first poll comes one interval after the start; by then nats-server
	// has installed its signal handlers (it does so in NewServer, right after
	// parsing the file), so a SIGHUP cannot hit its default action and kill it.
	ctx, stopWatch := context.WithCancel(context.Background())
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		_ = w.Run(ctx)
	}()
	defer func() {
		stopWatch()
		<-watching
	}()

	for {
		select {
		case sig := <-sigs:
			if err := cmd.Process.Signal(sig); err != nil {
				// Already gone: its exit is about to arrive on exited.
				if !errors.Is(err, os.ErrProcessDone) {
					log.Error("forward signal", "signal", sig.String(), "pid", cmd.Process.Pid, "err", err)
				}
				continue
			}
			log.Info("forwarded signal", "signal", sig.String(), "pid", cmd.Process.Pid)
			if sig == syscall.SIGHUP {
				// The server reloads what it was last given; look at the
				// watched file now too, a refused content included.
				w.Kick()
			}
		case err := <-exited:
			code := exitStatus(cmd.ProcessState, err)
			log.Info("child exited", "pid", cmd.Process.Pid, "status", code, "state", cmd.ProcessState.String())
			return code
		}
	}
}

// exitStatus maps the child's end to our exit status, with the shell's
// 128+signal convention for a child killed by a signal.
func exitStatus(ps *os.ProcessState, waitErr error) int {
	if ps == nil {
		if waitErr != nil {
			return 1
		}
		return 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// short abbreviates a hex hash for log lines; 16 hex digits are plenty to
// tell configurations apart.
func short(h string) string {
	if len(h) > 16 {
		return h[:16]
	}
	return h
}
