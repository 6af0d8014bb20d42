package harness

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/meshbus/mesh/harness/controllerctr"
	"github.com/meshbus/mesh/harness/nats"
	"github.com/meshbus/mesh/mesh/wire"
)

// Describe tells a person how to reach the cluster left up by --keep: the
// bus address, the credential files, the containers and networks, how to
// look at monitoring (from the private network, through the probe) and how
// to remove it all. The bus address is the one last seen; a restart of
// the nats container may change it (docker port shows the new one).
func (c *Cluster) Describe() string {
	c.mu.Lock()
	addr := c.busAddr
	var names []string
	for _, m := range c.topology.Members {
		if h, ok := c.roles[memberRole(m)]; ok {
			names = append(names, h.Name())
		}
	}
	c.mu.Unlock()

	run := c.s.id
	credArgs := controllerctr.StoreArgs(controllerctr.CredentialArgs(wire.ControllerUser), c.storeURL)
	monitor := "http://" + AliasNATS + ":" + strconv.Itoa(nats.MonitorPort) + "/varz"
	filter := LabelRun + "=" + run

	var b strings.Builder
	fmt.Fprintf(&b, "cluster of run %s:\n", run)
	fmt.Fprintf(&b, "  bus (TLS):     %s (certificate names: those in each credential's url; dial with bus.WithAddress)\n", addr)
	fmt.Fprintf(&b, "  credentials:   docker run --rm --network %s -v %s:%s -v %s:%s:ro %s %s (any user for %s)\n",
		c.networks[Private], c.state, controllerctr.StateDir, c.meshDir, controllerctr.MeshDir, c.images.controller, strings.Join(credArgs, " "), wire.ControllerUser)
	fmt.Fprintf(&b, "  state:         %s\n", c.state)
	fmt.Fprintf(&b, "  containers:    %s (docker logs <name>)\n", strings.Join(names, ", "))
	fmt.Fprintf(&b, "  networks:      %s (private), %s (outside)\n", c.networks[Private], c.networks[Outside])
	fmt.Fprintf(&b, "  monitoring:    docker run --rm --network %s %s http %s\n", c.networks[Private], c.images.probe, monitor)
	fmt.Fprintf(&b, "  remove:        docker rm -f $(docker ps -aq --filter label=%s); docker network rm $(docker network ls -q --filter label=%s)",
		filter, filter)
	if c.s.ownWork {
		fmt.Fprintf(&b, "; rm -rf %s", c.s.work)
	}
	fmt.Fprintf(&b, "; rm -f %s", keptMarker(c.s.id))
	b.WriteString("\n")
	return b.String()
}
