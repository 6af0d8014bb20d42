package compose

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path"
	"strconv"

	"github.com/meshbus/mesh/mesh/meshdesc"
)

// Where the server's files are inside its container.
const (
	DefaultConfigDir = "/etc/nats"
	DefaultStoreDir  = "/data"
	// ConfigFile, CertFile and KeyFile are the file names in ConfigDir.
	ConfigFile = "nats.conf"
	CertFile   = "server-cert.pem"
	KeyFile    = "server-key.pem"
)

// Inputs are what the configuration needs besides the description.
type Inputs struct {
	// Hashes maps every principal's user name to its bcrypt hash.
	Hashes map[string]string
	// ConfigDir is where the server finds its TLS files; default
	// DefaultConfigDir.
	ConfigDir string
	// StoreDir is the JetStream store; default DefaultStoreDir.
	StoreDir string
	// Listen overrides the client listen address (host:port); default
	// "0.0.0.0:<bus.port>". Tests starting a server in-process use it.
	Listen string
	// Monitor overrides the monitoring listen address; default
	// "<bus.monitor>:<bus.monitor_port>".
	Monitor string
}

// ErrMissingHash means a principal has no bcrypt hash in the inputs.
var ErrMissingHash = errors.New("no password hash for user")

// Config renders the nats-server configuration in the server's JSON
// syntax: TLS on the client port, monitoring on the private host only,
// JetStream on the store directory with an fsync on every write, one
// account, and every principal's user with its permissions.
func Config(m *meshdesc.Mesh, in Inputs) ([]byte, error) {
	if in.ConfigDir == "" {
		in.ConfigDir = DefaultConfigDir
	}
	if in.StoreDir == "" {
		in.StoreDir = DefaultStoreDir
	}
	if in.Listen == "" {
		in.Listen = "0.0.0.0:" + strconv.Itoa(m.Bus.Port)
	}
	if in.Monitor == "" {
		in.Monitor = net.JoinHostPort(m.Bus.Monitor, strconv.Itoa(m.Bus.MonitorPort))
	}
	users := map[string][]user{}
	for _, p := range Principals(m) {
		hash, ok := in.Hashes[p.User]
		if !ok || hash == "" {
			return nil, fmt.Errorf("compose config: %w %q", ErrMissingHash, p.User)
		}
		users[p.Account] = append(users[p.Account], render(p, hash))
	}
	cfg := config{
		ServerName: m.Name,
		Listen:     in.Listen,
		HTTP:       in.Monitor,
		TLS: tlsBlock{
			CertFile:   path.Join(in.ConfigDir, CertFile),
			KeyFile:    path.Join(in.ConfigDir, KeyFile),
			Timeout:    2,
			MinVersion: "1.2",
		},
		JetStream: jetstream{
			StoreDir: in.StoreDir,
			// Jepsen's NATS 2.12.1 analysis lost acknowledged writes under
			// the default lazy fsync; the mesh promises nothing lost.
			SyncInterval: "always",
		},
		Accounts: accounts(users, DefaultLimits()),
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	// Subjects start with '$' and hashes are full of them; HTML escaping
	// would only make the file harder to read.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(cfg); err != nil {
		return nil, fmt.Errorf("compose config: %w", err)
	}
	return buf.Bytes(), nil
}

type config struct {
	ServerName string             `json:"server_name"`
	Listen     string             `json:"listen"`
	HTTP       string             `json:"http"`
	TLS        tlsBlock           `json:"tls"`
	JetStream  jetstream          `json:"jetstream"`
	Accounts   map[string]account `json:"accounts"`
}

type tlsBlock struct {
	CertFile   string `json:"cert_file"`
	KeyFile    string `json:"key_file"`
	Timeout    int    `json:"timeout"`
	MinVersion string `json:"min_version"`
}

type jetstream struct {
	StoreDir     string `json:"store_dir"`
	SyncInterval string `json:"sync_interval"`
}

type account struct {
	JetStream *jsLimits     `json:"jetstream,omitempty"`
	Limits    *accountLimit `json:"limits,omitempty"`
	Users     []user        `json:"users,omitempty"`
	Exports   []export      `json:"exports,omitempty"`
	Imports   []imp         `json:"imports,omitempty"`
}

type jsLimits struct {
	MaxMem     int64 `json:"max_mem"`
	MaxFile    int64 `json:"max_file"`
	MaxStreams int   `json:"max_streams"`
	// MaxBytesRequired makes the server refuse a stream without MaxBytes.
	MaxBytesRequired bool `json:"max_bytes_required"`
}

type accountLimit struct {
	MaxConnections int `json:"max_connections"`
	MaxPayload     int `json:"max_payload"`
}

type export struct {
	Service  string   `json:"service,omitempty"`
	Stream   string   `json:"stream,omitempty"`
	Accounts []string `json:"accounts"`
}

type imp struct {
	Service *source `json:"service,omitempty"`
	Stream  *source `json:"stream,omitempty"`
}

type source struct {
	Account string `json:"account"`
	Subject string `json:"subject"`
}

type user struct {
	User        string      `json:"user"`
	Password    string      `json:"password"`
	Permissions permissions `json:"permissions"`
}

type permissions struct {
	Publish        subjectList `json:"publish"`
	Subscribe      subjectList `json:"subscribe"`
	AllowResponses bool        `json:"allow_responses,omitempty"`
}

type subjectList struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

func render(p Principal, hash string) user {
	return user{
		User:     p.User,
		Password: hash,
		Permissions: permissions{
			Publish:        list(p.Permissions.Publish),
			Subscribe:      list(p.Permissions.Subscribe),
			AllowResponses: p.Permissions.AllowResponses,
		},
	}
}

// list writes an empty grant as an explicit deny of everything: the
// server reads a missing or empty allow list as no restriction at all.
func list(allow []string) subjectList {
	if len(allow) == 0 {
		return subjectList{Deny: []string{">"}}
	}
	return subjectList{Allow: allow}
}
