package observe

import (
	"fmt"
	"strings"

	"github.com/meshbus/mesh/mesh/wire"
)

// AMQPEvent is one event of the broker's event exchange
// (harness/rabbitmq.Event, rabbitmq.ConnectionEventKeys): its routing key
// and its properties.
type AMQPEvent struct {
	Key     string
	Headers map[string]any
}

// AMQPRecord is what the broker's events say of every connection made to
// it: the closed ones and the refused ones too, which the broker's list of
// connections (AMQPConnections) no longer has.
type AMQPRecord struct {
	// Connections in the order the broker first spoke of them, in the
	// shape /connz gives on NATS. Reason is "" for one still open,
	// "closed", "login refused: <the broker's error>", or "closed before
	// it was opened" (a login let in and its virtual host refused, or a
	// client gone before it opened).
	Connections []Connection
	// Unsettled counts the logins the broker answered whose connection it
	// has neither opened nor closed yet. A refused login's client name
	// comes only with its close, which the broker delays (3 s on 3.10): a
	// reader that wants every name waits until none is unsettled.
	Unsettled int
}

// AMQPConnectionsEver folds the broker's events, oldest first, into its
// record of connections. A connection's events name it by its pid, so an
// event read twice changes nothing. An event about a connection without a
// pid is an error: the broker is not the one this reading was measured on
// (RabbitMQ 3.10, harness/rabbitmq/events.go), and a record read wrong
// would prove nothing.
func AMQPConnectionsEver(events []AMQPEvent) (AMQPRecord, error) {
	type login struct {
		user, refused string
	}
	type state struct {
		opened, closed bool
		login          *login
	}
	var (
		conns  []Connection
		states []state
		byPid  = map[string]int{}
		// logins by the broker's name of their connection ("peer -> local"),
		// until the connection is opened or closed.
		logins = map[string]login{}
	)
	at := func(e AMQPEvent) (int, error) {
		pid := text(e.Headers["pid"])
		if pid == "" {
			return 0, fmt.Errorf("read the broker's events: %s without a pid: %v", e.Key, e.Headers)
		}
		i, ok := byPid[pid]
		if !ok {
			i = len(conns)
			byPid[pid] = i
			conns = append(conns, Connection{})
			states = append(states, state{})
		}
		return i, nil
	}
	for _, e := range events {
		h := e.Headers
		switch e.Key {
		case wire.EventLoginSucceeded:
			logins[text(h["connection_name"])] = login{user: text(h["name"])}
		case wire.EventLoginFailed:
			logins[text(h["connection_name"])] = login{user: text(h["name"]), refused: text(h["error"])}
		case wire.EventConnectionCreated:
			i, err := at(e)
			if err != nil {
				return AMQPRecord{}, err
			}
			c := &conns[i]
			c.User, c.Name = text(h["user"]), text(h["user_provided_name"])
			c.TLSVersion = strings.TrimPrefix(text(h["ssl_protocol"]), "tlsv")
			c.IP = text(h["peer_host"])
			states[i].opened = true
			delete(logins, text(h["name"]))
		case wire.EventConnectionClosed:
			i, err := at(e)
			if err != nil {
				return AMQPRecord{}, err
			}
			conns[i].Name = text(h["user_provided_name"])
			states[i].closed = true
			name := text(h["name"])
			if l, ok := logins[name]; ok && !states[i].opened {
				states[i].login = &l
			}
			delete(logins, name)
		}
	}
	for i, st := range states {
		c := &conns[i]
		switch {
		case st.opened && st.closed:
			c.Reason = "closed"
		case st.opened:
		case st.login != nil && st.login.refused != "":
			c.User, c.Reason = st.login.user, "login refused: "+st.login.refused
		case st.login != nil:
			c.User, c.Reason = st.login.user, "closed before it was opened"
		default:
			c.Reason = "closed before it was opened"
		}
	}
	return AMQPRecord{Connections: conns, Unsettled: len(logins)}, nil
}

// NotRecorded are the connections of open (AMQPConnections: the broker's
// list, read before the events) that the record has of no connection with
// the same user and name: none, when the record is whole.
func NotRecorded(open []Connection, record AMQPRecord) []Connection {
	type key struct{ user, name string }
	have := map[key]bool{}
	for _, c := range record.Connections {
		have[key{c.User, c.Name}] = true
	}
	var out []Connection
	for _, c := range open {
		if !have[key{c.User, c.Name}] {
			out = append(out, c)
		}
	}
	return out
}

// text is a header's value as a string: the event exchange writes a
// binary as a string, and an Erlang string (a refusal's error) as a list
// of character codes.
func text(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case []any:
		var b strings.Builder
		for _, r := range v {
			code, ok := charCode(r)
			if !ok {
				return fmt.Sprint(v)
			}
			b.WriteRune(code)
		}
		return b.String()
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// charCode is an AMQP table's integer, of whichever width, as a rune.
func charCode(v any) (rune, bool) {
	switch v := v.(type) {
	case int8:
		return rune(v), true
	case uint8:
		return rune(v), true
	case int16:
		return rune(v), true
	case uint16:
		return rune(v), true
	case int32:
		return v, true
	case uint32:
		return rune(v), true
	case int64:
		return rune(v), true
	case uint64:
		return rune(v), true
	case int:
		return rune(v), true
	}
	return 0, false
}
