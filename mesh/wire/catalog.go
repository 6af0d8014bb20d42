package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The catalogue (design 25 §7): a module claiming seat CatalogSeat, named
// after it, serves CatalogTool, which answers with every tool the
// manifests declare: its name, its description and the JSON Schema of its
// arguments. A person's client lists the mesh's tools by asking it.
const (
	// CatalogSeat is the catalogue's seat, and the name of the module that
	// claims it: a caller asks ToolSubject(CatalogSeat, CatalogTool).
	CatalogSeat = "mesh-catalog"
	// CatalogTool is the tool that lists the mesh's tools.
	CatalogTool = "catalog_tools"
)

// BrokerSeat is the bus's server's seat (design 25 §5, ADR 0079): named
// after the role, not the product, so that the server changing (AMQP's
// broker, then NATS's) changes no seat. One server holds it per mesh:
// placed on one node at most, or adopted in place (mesh-controller
// adopt), never both.
const BrokerSeat = "mesh-broker"

// ToolInfo is one tool as the catalogue lists it.
type ToolInfo struct {
	Module      string `json:"module"`
	Tool        string `json:"tool"`
	Description string `json:"description,omitempty"`
	// Args is the JSON Schema of the tool's arguments: an object schema
	// ({"type":"object",…}); a tool whose manifest says nothing of them
	// takes any object.
	Args json.RawMessage `json:"args"`
}

// Name is how the tool is called from outside: "<module>.<tool>".
func (t ToolInfo) Name() string { return t.Module + "." + t.Tool }

// Catalogue is the catalogue's answer, and the configuration the
// controller gives the catalogue's module (ModuleConfig).
type Catalogue struct {
	Tools []ToolInfo `json:"tools"`
}

// AnyObject is the schema of a tool's arguments when its manifest gives
// none.
var AnyObject = json.RawMessage(`{"type":"object"}`)

// ErrCatalogue is wrapped by every refusal of a catalogue.
var ErrCatalogue = errors.New("not a catalogue")

// MaxCatalogue bounds a catalogue's size, well under the bus's payload.
const MaxCatalogue = 512 << 10

// ParseCatalogue reads a catalogue strictly: one JSON object, every tool
// named validly, once, with an object schema, in name order.
func ParseCatalogue(data []byte) (Catalogue, error) {
	if len(data) > MaxCatalogue {
		return Catalogue{}, fmt.Errorf("%w: %d bytes, more than %d", ErrCatalogue, len(data), MaxCatalogue)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Catalogue
	if err := dec.Decode(&c); err != nil {
		return Catalogue{}, fmt.Errorf("%w: %v", ErrCatalogue, err)
	}
	if dec.More() {
		return Catalogue{}, fmt.Errorf("%w: more than one JSON value", ErrCatalogue)
	}
	if c.Tools == nil {
		return Catalogue{}, fmt.Errorf("%w: no tools list", ErrCatalogue)
	}
	for i, t := range c.Tools {
		if err := CheckName(t.Module); err != nil {
			return Catalogue{}, fmt.Errorf("%w: tools[%d] module: %v", ErrCatalogue, i, err)
		}
		if err := CheckToolName(t.Tool); err != nil {
			return Catalogue{}, fmt.Errorf("%w: tools[%d] tool: %v", ErrCatalogue, i, err)
		}
		if err := CheckArgsSchema(t.Args); err != nil {
			return Catalogue{}, fmt.Errorf("%w: tools[%d] %s: %v", ErrCatalogue, i, t.Name(), err)
		}
		if i > 0 && strings.Compare(c.Tools[i-1].Name(), t.Name()) >= 0 {
			return Catalogue{}, fmt.Errorf("%w: tools[%d] %s: not after %s (the list is sorted by name, each once)", ErrCatalogue, i, t.Name(), c.Tools[i-1].Name())
		}
	}
	return c, nil
}

// Marshal is the catalogue as it goes on the wire, its tools sorted.
func (c Catalogue) Marshal() []byte {
	c.Tools = slices.Clone(c.Tools)
	if c.Tools == nil {
		c.Tools = []ToolInfo{}
	}
	slices.SortFunc(c.Tools, func(a, b ToolInfo) int { return strings.Compare(a.Name(), b.Name()) })
	b, _ := json.Marshal(c)
	return b
}

// CheckArgsSchema checks the schema of a tool's arguments: a JSON object
// whose "type" is "object", as MCP requires of a tool's input schema.
// What else it says is the schema's own business.
func CheckArgsSchema(schema json.RawMessage) error {
	var s map[string]any
	if err := json.Unmarshal(schema, &s); err != nil || s == nil {
		return fmt.Errorf("args: not a JSON object schema")
	}
	if s["type"] != "object" {
		return fmt.Errorf(`args: the schema's type is %v; a tool's arguments are an object (want "type": "object")`, s["type"])
	}
	return nil
}
