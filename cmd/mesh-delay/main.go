// Command mesh-delay holds every packet netfilter queues to it for a fixed
// time, then lets it go, in the order they came: the delay fault's
// stand-in for tc netem on kernels built without sch_netem.
//
// It binds one NFQUEUE queue over netlink (nfnetlink_queue, metadata
// only: nothing of a packet is copied but its id), and answers each packet
// with NF_ACCEPT once -delay has passed since it arrived. Rules sending
// packets to the queue are not its business: the harness installs them
// (iptables -j NFQUEUE --queue-num N --queue-bypass) after the line
//
//	mesh-delay: queue N bound
//
// and removes them before stopping it. On SIGTERM or SIGINT it accepts
// every packet it holds at once, says how many it delayed and what the
// kernel dropped, and exits 0. Should it die instead, its socket closes,
// the kernel unbinds the queue and --queue-bypass lets traffic through
// undelayed rather than stall it.
//
// The kernel holds at most -maxlen packets for it (netem's default limit,
// 1000); past that, or when its socket's receive buffer overflows
// (ENOBUFS), packets are dropped, and mesh-delay says so.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mesh-delay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	queue := fs.Uint("queue", 0, "NFQUEUE queue `number` to bind (0–65535)")
	delay := fs.Duration("delay", 0, "how long to hold each packet")
	maxlen := fs.Uint("maxlen", 1000, "most `packets` the kernel holds for us; it drops the rest")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || *queue > 65535 || *delay <= 0 || *maxlen == 0 || *maxlen > 1<<31 {
		fmt.Fprintln(stderr, "mesh-delay: want -queue 0–65535, -delay > 0 and -maxlen > 0, and no arguments")
		return 2
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	d := &delayer{queue: uint16(*queue), delay: *delay, out: stdout}
	if err := d.serve(uint32(*maxlen), sigs); err != nil {
		fmt.Fprintf(stderr, "mesh-delay: %v\n", err)
		return 1
	}
	return 0
}

// held is a packet waiting for its verdict.
type held struct {
	id  uint32
	due time.Time
}

type delayer struct {
	queue uint16
	delay time.Duration
	out   io.Writer

	fd      int
	seq     uint32
	fifo    []held
	delayed int // packets accepted after their delay
	overrun int // ENOBUFS seen
}

// serve binds the queue and delays packets until a signal arrives.
func (d *delayer) serve(maxlen uint32, sigs <-chan os.Signal) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return fmt.Errorf("open a netfilter netlink socket: %w", err)
	}
	defer unix.Close(fd)
	d.fd = fd
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("bind the netlink socket: %w", err)
	}
	// Room for a burst: a metadata-only packet message is about 100 bytes.
	// FORCE needs CAP_NET_ADMIN, which the helper has; else the default.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20); err != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	}
	// A wake-up for the poll loop when a signal comes.
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return fmt.Errorf("make a pipe: %w", err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	stop := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			_, _ = unix.Write(p[1], []byte{1})
		case <-stop:
		}
	}()
	defer close(stop)

	if err := d.bind(maxlen); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "mesh-delay: queue %d bound, holding each packet %s (at most %d held)\n", d.queue, d.delay, maxlen)

	buf := make([]byte, 64<<10)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(p[0]), Events: unix.POLLIN}}
	for {
		timeout := -1
		if len(d.fifo) > 0 {
			// Milliseconds, rounded up: never early.
			timeout = int((time.Until(d.fifo[0].due) + time.Millisecond - 1) / time.Millisecond)
			timeout = max(timeout, 0)
		}
		if _, err := unix.Poll(fds, timeout); err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("poll: %w", err)
		}
		if fds[0].Revents != 0 {
			if err := d.receive(buf); err != nil {
				return err
			}
		}
		if err := d.release(time.Now()); err != nil {
			return err
		}
		if fds[1].Revents != 0 {
			return d.drain(buf)
		}
	}
}

// bind sends the configuration and waits for its acknowledgement.
func (d *delayer) bind(maxlen uint32) error {
	d.seq++
	if err := unix.Sendto(d.fd, bindMessage(d.seq, d.queue, maxlen), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("bind queue %d: %w", d.queue, err)
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(d.fd, buf, 0)
		if err != nil {
			return fmt.Errorf("bind queue %d: read the answer: %w", d.queue, err)
		}
		evs, err := parse(buf[:n])
		if err != nil {
			return fmt.Errorf("bind queue %d: %w", d.queue, err)
		}
		for _, ev := range evs {
			if ev.ack && ev.seq == d.seq {
				if ev.errno != 0 {
					// EBUSY: another process has the queue.
					return fmt.Errorf("bind queue %d: the kernel refused: %w", d.queue, syscall.Errno(-ev.errno))
				}
				return nil
			}
		}
	}
}

// receive reads every message waiting, without blocking, and holds the
// packets.
func (d *delayer) receive(buf []byte) error {
	for {
		n, _, err := unix.Recvfrom(d.fd, buf, unix.MSG_DONTWAIT)
		switch {
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
			return nil
		case errors.Is(err, unix.ENOBUFS):
			// The socket's buffer overflowed: the kernel dropped the
			// packets it could not tell us about. Go on with the rest.
			d.overrun++
			fmt.Fprintf(d.out, "mesh-delay: queue overflow (ENOBUFS, %d so far): the socket's receive buffer was full and the kernel dropped packets\n", d.overrun)
			continue
		case err != nil:
			return fmt.Errorf("read from queue %d: %w", d.queue, err)
		}
		evs, err := parse(buf[:n])
		if err != nil {
			return fmt.Errorf("read from queue %d: %w", d.queue, err)
		}
		now := time.Now()
		for _, ev := range evs {
			switch {
			case ev.packet:
				d.fifo = append(d.fifo, held{id: ev.id, due: now.Add(d.delay)})
			case ev.ack && ev.errno != 0:
				// A verdict the kernel refused (say, for a packet it no
				// longer holds): worth saying, not worth stopping for.
				fmt.Fprintf(d.out, "mesh-delay: the kernel refused message %d: %v\n", ev.seq, syscall.Errno(-ev.errno))
			}
		}
	}
}

// release accepts every held packet due by now, oldest first.
func (d *delayer) release(now time.Time) error {
	i := 0
	for ; i < len(d.fifo) && !d.fifo[i].due.After(now); i++ {
		if err := d.accept(d.fifo[i].id); err != nil {
			return err
		}
		d.delayed++
	}
	d.fifo = d.fifo[i:]
	return nil
}

func (d *delayer) accept(id uint32) error {
	d.seq++
	if err := unix.Sendto(d.fd, verdictMessage(d.seq, d.queue, id), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("accept packet %d of queue %d: %w", id, d.queue, err)
	}
	return nil
}

// drain accepts everything held and what has just arrived, at once, and
// reports. Closing the socket with packets still queued would have the
// kernel drop them.
func (d *delayer) drain(buf []byte) error {
	if err := d.receive(buf); err != nil {
		return err
	}
	early := len(d.fifo)
	for _, h := range d.fifo {
		if err := d.accept(h.id); err != nil {
			return err
		}
	}
	d.fifo = nil
	fmt.Fprintf(d.out, "mesh-delay: stopping: %d packets delayed, %d held released early; %s\n", d.delayed, early, d.kernelCounts())
	return nil
}

// kernelCounts reads the queue's line of /proc/net/netfilter/nfnetlink_queue:
// queue number, peer port id, packets waiting, copy mode, copy range,
// dropped (queue full), dropped (socket full), last id, 1.
func (d *delayer) kernelCounts() string {
	f, err := os.Open("/proc/net/netfilter/nfnetlink_queue")
	if err != nil {
		return "kernel counters unreadable: " + err.Error()
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 8 && fields[0] == strconv.Itoa(int(d.queue)) {
			return fmt.Sprintf("the kernel dropped %s (queue full) and %s (socket full), %s overflows seen", fields[5], fields[6], strconv.Itoa(d.overrun))
		}
	}
	return "queue not listed by the kernel"
}
