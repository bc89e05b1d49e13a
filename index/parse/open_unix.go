//go:build unix

package parse

import (
	"os"
	"syscall"
)

// openNoBlock opens path for reading without waiting for a writer, as
// opening a FIFO would.
func openNoBlock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
