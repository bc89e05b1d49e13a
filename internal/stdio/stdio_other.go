//go:build !unix

// Package stdio keeps a process's standard output for a protocol (the
// runner's replies, `lore mcp`'s JSON-RPC). It imports nothing of Lore's,
// so the engine and the front doors may both use it.
package stdio

import "os"

// ProtocolOutput returns the stream the protocol must be written to. On
// this platform only Go's os.Stdout is pointed at standard error; output C
// code writes to the process's standard output is not redirected.
func ProtocolOutput() (*os.File, error) {
	out := os.Stdout
	os.Stdout = os.Stderr
	return out, nil
}
