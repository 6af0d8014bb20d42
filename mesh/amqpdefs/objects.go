package amqpdefs

import (
	"slices"

	"github.com/meshbus/mesh/mesh/meshdesc"
)

// Objects are the virtual hosts, exchanges, queues and bindings of m's
// definitions, without users or grants: what the controller asserts on a
// running broker at every start (design 25 §3 on AMQP). They do not depend
// on in.Hashes, which Objects ignores.
func Objects(m *meshdesc.Mesh, in Inputs) (Definitions, error) {
	in.Hashes = map[string]string{}
	for _, u := range slices.Concat(Users(m), ControlUsers(m)) {
		in.Hashes[u] = "-"
	}
	d, err := Build(m, in)
	if err != nil {
		return Definitions{}, err
	}
	return Definitions{Vhosts: d.Vhosts, Exchanges: d.Exchanges, Queues: d.Queues, Bindings: d.Bindings}, nil
}
