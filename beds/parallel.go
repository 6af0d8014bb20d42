package beds

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// clusterMemory is what one scenario's cluster may hold at its largest (the living bed's on
// AMQP: RabbitMQ, PostgreSQL, NATS, the controller and two hosts, with room for the scenario's
// own clients): each scenario run at once needs that much.
const clusterMemory = 2 << 30

// DefaultParallel is how many scenarios to run at once on this machine, and why: one more than
// its cores, since a scenario spends much of its time waiting on its cluster rather than
// computing, and no more than its memory holds clusters.
func DefaultParallel() (int, string) {
	cores := runtime.NumCPU()
	n := cores + 1
	why := fmt.Sprintf("%d cores", cores)
	if mem, ok := memTotal(); ok {
		why += fmt.Sprintf(", %d GiB", mem>>30)
		n = min(n, max(1, int(mem/clusterMemory)))
	}
	return n, why
}

// memTotal is the machine's memory, from /proc/meminfo; false where that cannot be read.
func memTotal() (uint64, bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseUint(fields[1], 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}
