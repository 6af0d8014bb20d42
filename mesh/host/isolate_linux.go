package host

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// The capabilities running a module as an identity of its own takes:
// changing the process's user and group, and giving the module's files
// to its group (capability numbers of linux/capability.h).
var isolationCaps = []struct {
	bit  uint
	name string
}{{0, "CAP_CHOWN"}, {6, "CAP_SETGID"}, {7, "CAP_SETUID"}}

// canIsolate says why this process cannot run modules as identities of
// their own, or nil when it can: it reads its own effective capabilities
// rather than assuming root has them (a container may drop them).
func canIsolate() error {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("%w: read this process's capabilities: %w", ErrIsolation, err)
	}
	var eff uint64
	found := false
	for sc := bufio.NewScanner(bytes.NewReader(status)); sc.Scan(); {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("CapEff:")); ok {
			if eff, err = strconv.ParseUint(string(bytes.TrimSpace(v)), 16, 64); err != nil {
				return fmt.Errorf("%w: read this process's capabilities: %w", ErrIsolation, err)
			}
			found = true
		}
	}
	if !found {
		return fmt.Errorf("%w: /proc/self/status has no CapEff line", ErrIsolation)
	}
	var missing []string
	for _, c := range isolationCaps {
		if eff&(1<<c.bit) == 0 {
			missing = append(missing, c.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: the host runs as uid %d without %v; run it as root (or give it those capabilities), or without --programs to run no module", ErrIsolation, os.Geteuid(), missing)
	}
	return nil
}

// processAs makes a module's process run as id, with no supplementary
// group: it would otherwise keep the host's.
func processAs(id Identity) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: id.UID, Gid: id.GID, Groups: []uint32{}}}
}
