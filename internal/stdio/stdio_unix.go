//go:build unix

// Package stdio keeps a process's standard output for a protocol (the
// runner's replies, `lore mcp`'s JSON-RPC): anything else that prints to
// it, Go or C, prints to standard error instead. It imports nothing of
// Lore's, so the engine and the front doors may both use it.
package stdio

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ProtocolOutput returns the stream the protocol must be written to, and
// points file descriptor 1 (and so os.Stdout) at standard error, so that
// anything C code or a stray print writes lands in the log instead of
// corrupting the protocol. The returned stream is not inherited by child
// processes.
func ProtocolOutput() (*os.File, error) {
	fd, err := unix.Dup(1)
	if err != nil {
		return nil, fmt.Errorf("dup stdout: %w", err)
	}
	unix.CloseOnExec(fd)
	if err := unix.Dup2(2, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("redirect stdout: %w", err)
	}
	return os.NewFile(uintptr(fd), "protocol"), nil
}
