//go:build !linux

package host

import (
	"fmt"
	"runtime"
	"syscall"
)

// canIsolate: running a module as an identity of its own is done on
// Linux alone; elsewhere the host runs no module rather than run it as
// itself.
func canIsolate() error {
	return fmt.Errorf("%w: modules run as identities of their own on Linux only, not %s; run the host without --programs", ErrIsolation, runtime.GOOS)
}

func processAs(Identity) *syscall.SysProcAttr { return nil }
