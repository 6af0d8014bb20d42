package store

import (
	"fmt"
	"slices"
	"time"

	"github.com/meshbus/mesh/mesh/wire"
)

// Seat is a foundation seat held by a server adopted in place
// (mesh-controller adopt; design 25 §9 step 2, ADR 0100): the server
// stood before the mesh claimed it, with a configuration and data of its
// own, and the controller owns its configuration from the adoption on.
type Seat struct {
	// Name is the seat (wire.BrokerSeat).
	Name string `json:"name"`
	// Module is the description's module claiming it.
	Module string `json:"module"`
	// Server is where the server answered the controller at adoption (its
	// monitoring endpoint), and ServerID its own id there.
	Server   string `json:"server"`
	ServerID string `json:"server_id"`
	// Config is the configuration file the server watches, which the
	// controller writes from the adoption on.
	Config string `json:"config"`
	// Raised is the configuration the server was raised with, as it was
	// read at adoption: every composition keeps it.
	Raised  []byte    `json:"raised"`
	Adopted time.Time `json:"adopted"`
}

// CheckSeat refuses a seat record that could not have been adopted.
func CheckSeat(s Seat) error {
	if wire.CheckName(s.Name) != nil || wire.CheckName(s.Module) != nil || s.Server == "" || s.Config == "" || len(s.Raised) == 0 || s.Adopted.IsZero() {
		return fmt.Errorf("put seat: a seat, its module, the server, its configuration file, what it was raised with and when are required, got %s held by %q at %q", s.Name, s.Module, s.Server)
	}
	return nil
}

func copySeat(s Seat) Seat {
	s.Raised = slices.Clone(s.Raised)
	return s
}
