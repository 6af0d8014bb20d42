package wire

import (
	"fmt"
	"strings"
)

// The buses a mesh's own traffic can be on, as a cutover's record and a
// node's declaration name them.
const (
	BusNATS = "nats"
	BusAMQP = "amqp"
)

// BusOfScheme is the bus a credential URL's scheme dials ("" for none).
func BusOfScheme(scheme string) string {
	switch scheme {
	case "tls", "nats":
		return BusNATS
	case "amqps", "amqp":
		return BusAMQP
	}
	return ""
}

// Move asks a node to move its traffic to another bus: the cutover
// (design 25 §9 step 5, docs/decisions/0013), in two declarations of one
// generation. The first (Switch false) asks the node to prove that it
// reaches Bus with its own new credential, which it fetches sealed to its
// key like its modules' (CredentialsAnswer.Next) and which a declaration
// never carries, and to move nothing: applying it says it did. The
// second (Switch true) asks it to move: its modules' credentials and then
// its own are the new bus's, its modules are started again on them, and
// it reports on Bus. A host that cannot read Move refuses the
// declaration (an unknown field), which names it.
type Move struct {
	Generation uint64 `json:"generation"`
	Bus        string `json:"bus"`
	Switch     bool   `json:"switch,omitempty"`
}

// NextCredentials are a node's credentials on the bus a cutover moves it
// to, each sealed to the node's key: its host's and its declared modules'.
type NextCredentials struct {
	Generation uint64            `json:"generation"`
	Bus        string            `json:"bus"`
	Host       []byte            `json:"host"`
	Sealed     map[string][]byte `json:"sealed,omitempty"`
}

// MoveRefusal is how a host words its refusal to move in a cutover's
// generation; the controller knows a refusal of its cutover by it
// (RefusesMove).
func MoveRefusal(generation uint64, bus, why string) string {
	return fmt.Sprintf("move %d to %s: %s", generation, bus, why)
}

// RefusesMove says whether a node's refusal is of generation's move: its
// host could not reach the new bus, or cannot read a declaration that
// asks it to move (a host built before the cutover: the field is unknown
// to it, and the refusal quotes it).
func RefusesMove(refused string, generation uint64) bool {
	return strings.Contains(refused, fmt.Sprintf("move %d to ", generation)) || strings.Contains(refused, `unknown field "move"`)
}
