package observe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/meshbus/mesh/mesh/host"
	"github.com/meshbus/mesh/mesh/link"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
)

// Connection is one client connection as the server's /connz lists it.
type Connection struct {
	User string
	// Name is the name the client gave its connection ("" for none).
	Name string
	// Reason is why it was closed; "" for an open one.
	Reason string
	// TLSVersion is the TLS version the client connected with ("1.3");
	// "" for a plain connection.
	TLSVersion string
	IP         string
}

// Connections reads an answer of /connz (ConnzURL, with auth=true).
func Connections(body []byte) ([]Connection, error) {
	var connz struct {
		Connections []struct {
			User       string `json:"authorized_user"`
			Name       string `json:"name"`
			Reason     string `json:"reason"`
			TLSVersion string `json:"tls_version"`
			IP         string `json:"ip"`
		} `json:"connections"`
	}
	if err := json.Unmarshal(body, &connz); err != nil {
		return nil, fmt.Errorf("read /connz: %w", err)
	}
	out := make([]Connection, len(connz.Connections))
	for i, c := range connz.Connections {
		out[i] = Connection{User: c.User, Name: c.Name, Reason: c.Reason, TLSVersion: c.TLSVersion, IP: c.IP}
	}
	return out, nil
}

// OpenOverTLS are the connections of user that are open and encrypted.
func OpenOverTLS(conns []Connection, user string) []Connection {
	var out []Connection
	for _, c := range conns {
		if c.User == user && c.Reason == "" && c.TLSVersion != "" {
			out = append(out, c)
		}
	}
	return out
}

// EnrolledNodesSQL reads the nodes the controller's PostgreSQL store has
// recorded (its registry, mesh/controller/pgstore's migrations): a row
// per node, its name and the token it enrolled with, and when.
const EnrolledNodesSQL = "SELECT name, token, enrolled FROM nodes ORDER BY name"

// EnrolledNode is one row of EnrolledNodesSQL.
type EnrolledNode struct {
	Name, Token, Enrolled string
}

// EnrolledNodes reads the rows of EnrolledNodesSQL, by node.
func EnrolledNodes(rows [][]string) (map[string]EnrolledNode, error) {
	out := map[string]EnrolledNode{}
	for i, r := range rows {
		if len(r) != 3 {
			return nil, fmt.Errorf("nodes row %d: expected name, token, enrolled, got %q", i, r)
		}
		out[r[0]] = EnrolledNode{Name: r[0], Token: r[1], Enrolled: r[2]}
	}
	return out, nil
}

// Claim claims token for its node as a node would, with a sealing key
// made for the claim, at address when it is not empty (a mapped port):
// the host's own enrolment (host.Enrol). It returns the credential the
// controller answered with, or why there was none; ctx bounds the wait.
func Claim(ctx context.Context, token wire.Credential, address string) (wire.Credential, error) {
	key, err := seal.NewKey()
	if err != nil {
		return wire.Credential{}, err
	}
	var opts []link.Option
	if address != "" {
		opts = append(opts, link.WithAddress(address))
	}
	return host.Enrol(ctx, token, key, opts...)
}

// RefusedLogin reports whether err is the server refusing the login
// itself (an authorization violation): the user is not one it has, or not
// with that password. A claim refused so never reached the controller.
func RefusedLogin(err error) bool {
	if err == nil {
		return false
	}
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, plane.ErrLoginRefused) ||
		strings.Contains(strings.ToLower(err.Error()), "authorization violation")
}

// Named are the connections whose client gave them name.
func Named(conns []Connection, name string) []Connection {
	var out []Connection
	for _, c := range conns {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// AMQPConnectionsColumns are the columns of `rabbitmqctl list_connections
// --formatter json` that AMQPConnections reads.
var AMQPConnectionsColumns = []string{"user", "ssl_protocol", "peer_host", "client_properties"}

// AMQPConnections reads the broker's open connections, as rabbitmqctl
// lists them with AMQPConnectionsColumns, into the shape /connz gives on
// NATS: the user, the name the client gave its connection, the TLS
// version ("1.3"; "" for a plain one), the peer's address as the broker
// spells it (an address tuple: "[0 0 0 0 0 65535 44049 1]"). The broker
// lists no closed connection: every one is open.
func AMQPConnections(body []byte) ([]Connection, error) {
	var list []struct {
		User        string `json:"user"`
		SSLProtocol any    `json:"ssl_protocol"`
		// peer_host is an Erlang address tuple, as a list of numbers.
		PeerHost any `json:"peer_host"`
		// client_properties is a list of [name, type, value] triples.
		ClientProperties [][]any `json:"client_properties"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("read the broker's connections: %w", err)
	}
	out := make([]Connection, 0, len(list))
	for _, c := range list {
		conn := Connection{User: c.User, IP: fmt.Sprint(c.PeerHost)}
		// "tlsv1.3", or the atom '' (read as "" or an empty list) for a
		// plain connection.
		if p, ok := c.SSLProtocol.(string); ok {
			conn.TLSVersion = strings.TrimPrefix(p, "tlsv")
		}
		for _, p := range c.ClientProperties {
			if len(p) == 3 && p[0] == "connection_name" {
				conn.Name, _ = p[2].(string)
			}
		}
		out = append(out, conn)
	}
	return out, nil
}
