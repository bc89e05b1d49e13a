//go:build !unix

package llamarunner

import "os"

// ProtocolOutput returns standard output; on this platform C output is not
// redirected.
func ProtocolOutput() (*os.File, error) { return os.Stdout, nil }
