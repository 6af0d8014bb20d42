package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/meshbus/mesh/mesh/controller/statedir"
)

// NATSConfigFile is the host path of the composed nats-server
// configuration: the file the nats container's entrypoint watches.
func (c *Cluster) NATSConfigFile() string { return statedir.Layout{Dir: c.state}.NATSConfig() }

// ReadNATSConfig returns the composed configuration as it is on disk.
func (c *Cluster) ReadNATSConfig() ([]byte, error) {
	b, err := os.ReadFile(c.NATSConfigFile())
	if err != nil {
		return nil, fmt.Errorf("read nats configuration: %w", err)
	}
	return b, nil
}

// WriteNATSConfig writes content over the composed configuration in
// place: truncated and rewritten through the same file, as an editor or a
// careless tool does, not replaced by a rename as the controller does. The
// entrypoint may therefore see it at any point of the write.
func (c *Cluster) WriteNATSConfig(content []byte) error {
	f, err := os.OpenFile(c.NATSConfigFile(), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("write nats configuration in place: %w", err)
	}
	if _, err := f.Write(content); err != nil {
		f.Close()
		return fmt.Errorf("write nats configuration in place: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write nats configuration in place: %w", err)
	}
	c.s.narrate("wrote %d bytes in place over %s", len(content), c.NATSConfigFile())
	return nil
}

// ErrNoMember means a cut was asked after a member the document lacks.
var ErrNoMember = errors.New("no such top-level member")

// CutAfter returns the prefix of the JSON object doc that ends right after
// the value of its top-level member key and the comma and white space that
// follow it: what a writer caught half-way leaves, just before the next
// member. Cut after "jetstream" in the composed configuration, it is the
// torn file of issue 7 §2: everything before the accounts, so no users,
// and a file nats-server's own parser accepts and reloads to.
func CutAfter(doc []byte, key string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("cut after %q: not a JSON object", key)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("cut after %q: %w", key, err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("cut after %q: %w", key, err)
		}
		if tok == key {
			// Through the comma and the white space after it: a writer's
			// next bytes would be the next member's name.
			i := int(dec.InputOffset())
			if j := skipSpace(doc, i); j < len(doc) && doc[j] == ',' {
				i = skipSpace(doc, j+1)
			}
			return doc[:i], nil
		}
	}
	if _, err := dec.Token(); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("cut after %q: %w", key, err)
	}
	return nil, fmt.Errorf("cut after %q: %w", key, ErrNoMember)
}

// skipSpace is the index of the first byte at or after i that is not JSON
// white space.
func skipSpace(doc []byte, i int) int {
	return len(doc) - len(bytes.TrimLeft(doc[i:], " \t\r\n"))
}
