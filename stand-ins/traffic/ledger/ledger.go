// Package ledger is what the traffic stand-in keeps of its life on the
// bus, a line per thing that happened, and how a bed reads it: the
// ticker's events confirmed by the bus, the tally's deliveries of them
// and its calls of the ticker's tool. The stand-in writes it and the
// cutover bed reads it from outside, so its shape is spelled once, here.
//
// The files live in the module's working directory (its home, which the
// host gives it and keeps across restarts), so a module restarted on
// another bus goes on where it stopped. Each line is appended with one
// write before the bus hears back (a delivery's ack) or after it answered
// (an emit's confirmation): a process killed at any point leaves at most
// a torn last line, which Read skips, and never a line for what did not
// happen.
package ledger

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// The modules the stand-in plays, the event it emits and the tool it
// serves (features/testdata/cutover.yaml declares them).
const (
	Ticker = "ticker"
	Tally  = "tally"
	// EventKey is the ticker's event; the tally consumes Ticker.EventKey.
	EventKey = "tick"
	// Tool is the ticker's tool, which answers its arguments; the tally
	// calls it.
	Tool = "echo"
)

// The ledger's files, in the module's working directory.
const (
	// EmittedFile is the ticker's: "<seq> <unix nanos>", a line per event
	// the bus confirmed, in sequence.
	EmittedFile = "emitted.log"
	// ReceivedFile is the tally's: "<seq> <unix nanos>", a line per
	// delivery, a sequence number again for each redelivery.
	ReceivedFile = "received.log"
	// CallsFile is the tally's: "ok <unix nanos>" or "failed <unix nanos>
	// <why>", a line per call of the ticker's tool, when it ended.
	CallsFile = "calls.log"
)

// EventID is the x-event-id of the ticker's event seq: the same for every
// attempt at it, so that deduplication can see a second one.
func EventID(seq uint64) string { return Ticker + "-" + strconv.FormatUint(seq, 10) }

// Tick is the body of the ticker's event.
type Tick struct {
	Seq uint64 `json:"seq"`
}

// Entry is one line of EmittedFile or ReceivedFile.
type Entry struct {
	Seq uint64
	At  time.Time
}

// Call is one line of CallsFile.
type Call struct {
	OK  bool
	At  time.Time
	Why string
}

// Append writes line to the file at path, creating it, in one write.
func Append(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// EntryLine is e as a line of EmittedFile or ReceivedFile.
func EntryLine(seq uint64, at time.Time) string {
	return strconv.FormatUint(seq, 10) + " " + strconv.FormatInt(at.UnixNano(), 10)
}

// CallLine is a call's line of CallsFile; err nil is an answer.
func CallLine(at time.Time, err error) string {
	ns := strconv.FormatInt(at.UnixNano(), 10)
	if err == nil {
		return "ok " + ns
	}
	// One line whatever the error says.
	return "failed " + ns + " " + strings.Join(strings.Fields(err.Error()), " ")
}

// ReadEntries parses EmittedFile or ReceivedFile. A line that does not
// end in a newline is torn (its writer was killed) and is skipped; any
// other line that does not parse is an error naming it.
func ReadEntries(data []byte) ([]Entry, error) {
	var out []Entry
	err := lines(data, func(n int, line string) error {
		f := strings.Fields(line)
		if len(f) != 2 {
			return fmt.Errorf("line %d: want <seq> <unix nanos>, got %q", n, line)
		}
		seq, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		at, err := nanos(f[1])
		if err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, Entry{Seq: seq, At: at})
		return nil
	})
	return out, err
}

// ReadCalls parses CallsFile, as ReadEntries does.
func ReadCalls(data []byte) ([]Call, error) {
	var out []Call
	err := lines(data, func(n int, line string) error {
		f := strings.SplitN(line, " ", 3)
		if len(f) < 2 || (f[0] != "ok" && f[0] != "failed") {
			return fmt.Errorf("line %d: want ok|failed <unix nanos> [why], got %q", n, line)
		}
		at, err := nanos(f[1])
		if err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		c := Call{OK: f[0] == "ok", At: at}
		if len(f) == 3 {
			c.Why = f[2]
		}
		out = append(out, c)
		return nil
	})
	return out, err
}

// LastSeq is the highest sequence number of the file at path, 0 when it
// does not exist yet: where a ticker started again goes on from.
func LastSeq(path string) (uint64, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	es, err := ReadEntries(data)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	var last uint64
	for _, e := range es {
		last = max(last, e.Seq)
	}
	return last, nil
}

// lines calls f for every whole line of data, numbered from 1.
func lines(data []byte, f func(n int, line string) error) error {
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		data = data[:i+1] // a torn last line
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		if sc.Text() == "" {
			continue
		}
		if err := f(n, sc.Text()); err != nil {
			return err
		}
	}
	return sc.Err()
}

func nanos(s string) (time.Time, error) {
	ns, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, ns), nil
}
