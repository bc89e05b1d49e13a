//go:build unix

package llamarunner

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ProtocolOutput returns the stream replies must go to, and points the
// process's standard output at standard error so that anything C code prints
// lands in the log instead of corrupting the protocol.
func ProtocolOutput() (*os.File, error) {
	fd, err := unix.Dup(1)
	if err != nil {
		return nil, fmt.Errorf("dup stdout: %w", err)
	}
	if err := unix.Dup2(2, 1); err != nil {
		return nil, fmt.Errorf("redirect stdout: %w", err)
	}
	return os.NewFile(uintptr(fd), "protocol"), nil
}
