package observe

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// What the server's monitoring endpoint says, read from outside. The
// endpoint has no authentication and answers on the private network
// only, so a bed asks it through a probe there; these functions spell the
// requests and read the answers.

// Varz is the part of /varz a bed compares across a reload.
type Varz struct {
	Start          time.Time `json:"start"`
	ConfigLoadTime time.Time `json:"config_load_time"`
	ConfigDigest   string    `json:"config_digest"`
	ServerName     string    `json:"server_name"`
	// InMsgs and OutMsgs count the messages clients published to the
	// server and it delivered, since it started.
	InMsgs  uint64 `json:"in_msgs"`
	OutMsgs uint64 `json:"out_msgs"`
}

// Change is what two readings of /varz say happened to the server
// between them.
type Change struct {
	// Restarted: the process is another (its start time moved).
	Restarted bool
	// Reloaded: it loaded its configuration again.
	Reloaded bool
	// NewConfiguration: what it loaded differs from what it had.
	NewConfiguration bool
}

// Since compares v with an earlier reading.
func (v Varz) Since(before Varz) Change {
	return Change{
		Restarted:        !v.Start.Equal(before.Start),
		Reloaded:         v.ConfigLoadTime.After(before.ConfigLoadTime),
		NewConfiguration: v.ConfigDigest != before.ConfigDigest,
	}
}

// VarzURL is the /varz address of the monitoring endpoint at host:port.
func VarzURL(host string, port int) string {
	return "http://" + hostPort(host, port) + "/varz"
}

// ParseVarz reads an answer of /varz.
func ParseVarz(body []byte) (Varz, error) {
	var v Varz
	if err := json.Unmarshal(body, &v); err != nil {
		return Varz{}, fmt.Errorf("read /varz: %w", err)
	}
	if v.Start.IsZero() {
		return Varz{}, fmt.Errorf("read /varz: no start time in %.80q", body)
	}
	return v, nil
}

// ConnzURL is the /connz address listing the connections in state (open,
// closed, all), with their users.
func ConnzURL(host string, port int, state string) string {
	q := url.Values{"state": {state}, "auth": {"true"}, "limit": {"1024"}}
	return "http://" + hostPort(host, port) + "/connz?" + q.Encode()
}

// ConnectionReasons reads an answer of /connz and returns, for each
// connection of user, why it was closed ("" for one still open).
func ConnectionReasons(body []byte, user string) ([]string, error) {
	var connz struct {
		Connections []struct {
			User   string `json:"authorized_user"`
			Reason string `json:"reason"`
		} `json:"connections"`
	}
	if err := json.Unmarshal(body, &connz); err != nil {
		return nil, fmt.Errorf("read /connz: %w", err)
	}
	var out []string
	for _, c := range connz.Connections {
		if c.User == user {
			out = append(out, c.Reason)
		}
	}
	return out, nil
}

// ConnectedUsers reads an answer of /connz and returns each user that
// has a connection in it, once, sorted.
func ConnectedUsers(body []byte) ([]string, error) {
	var connz struct {
		Connections []struct {
			User string `json:"authorized_user"`
		} `json:"connections"`
	}
	if err := json.Unmarshal(body, &connz); err != nil {
		return nil, fmt.Errorf("read /connz: %w", err)
	}
	var out []string
	for _, c := range connz.Connections {
		if !slices.Contains(out, c.User) {
			out = append(out, c.User)
		}
	}
	slices.Sort(out)
	return out, nil
}

// SubszURL is the /subsz address counting the subscriptions that a
// publish on subject would reach.
func SubszURL(host string, port int, subject string) string {
	q := url.Values{"subs": {"1"}, "test": {subject}}
	return "http://" + hostPort(host, port) + "/subsz?" + q.Encode()
}

// Subscribers reads an answer of /subsz?test=…: how many subscriptions
// the subject reaches.
func Subscribers(body []byte) (int, error) {
	var subsz struct {
		Total *int `json:"total"`
	}
	if err := json.Unmarshal(body, &subsz); err != nil || subsz.Total == nil {
		return 0, fmt.Errorf("read /subsz: no total in %.80q (%v)", body, err)
	}
	return *subsz.Total, nil
}

// ServerPID is the pid of nats-server among a container's processes,
// given as (pid, command line) pairs: the program nats-server, not the
// entrypoint (whose arguments name it), nor the short-lived
// `nats-server -t` that checks a new configuration. It reports false when
// there is none, or more than one.
func ServerPID(procs map[int]string) (int, bool) {
	var found []int
	for pid, cmd := range procs {
		args := strings.Fields(cmd)
		if len(args) > 0 && filepath.Base(args[0]) == "nats-server" && !slices.Contains(args, "-t") {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		return 0, false
	}
	return found[0], true
}

func hostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}
