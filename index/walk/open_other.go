//go:build !unix

package walk

import "os"

func openNoBlock(path string) (*os.File, error) { return os.Open(path) }
