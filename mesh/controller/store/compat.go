package store

import (
	"fmt"
	"maps"
	"time"

	"github.com/meshbus/mesh/mesh/wire"
)

// Compat is what the running controller last saw of the compatibility
// broker's clients (design 25 §5): the predecessor's connections, counted
// per user by the broker's own management API, and since when nobody has
// been connected. Status reads its retirement condition from it.
type Compat struct {
	// Module is the module declared the compatibility broker.
	Module string `json:"module"`
	// Checked is when the broker was last asked.
	Checked time.Time `json:"checked"`
	// Connected counts the open connections of each client user then.
	Connected map[string]int `json:"connected"`
	// IdleSince is when the controller first saw nobody connected, since
	// it last saw someone; zero while someone is. A controller that finds
	// nobody at its first look knows no earlier time: it says then.
	IdleSince time.Time `json:"idle_since,omitzero"`
	// RetireAfter is the retirement condition the description said then:
	// retirable once nobody has been connected for this long.
	RetireAfter time.Duration `json:"retire_after"`
}

// Clients is how many connections of client users the broker listed.
func (c Compat) Clients() int {
	n := 0
	for _, v := range c.Connected {
		n += v
	}
	return n
}

// Retirable says whether the retirement condition held when the broker
// was last asked.
func (c Compat) Retirable() bool {
	return c.Clients() == 0 && !c.IdleSince.IsZero() && c.Checked.Sub(c.IdleSince) >= c.RetireAfter
}

// CheckCompat refuses a record that could not have been observed.
func CheckCompat(c Compat) error {
	if wire.CheckName(c.Module) != nil || c.Checked.IsZero() {
		return fmt.Errorf("put compat: a module and when it was checked are required, got %+v", c)
	}
	return nil
}

func copyCompat(c Compat) Compat {
	c.Connected = maps.Clone(c.Connected)
	return c
}
