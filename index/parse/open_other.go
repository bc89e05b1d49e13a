//go:build !unix

package parse

import "os"

func openNoBlock(path string) (*os.File, error) { return os.Open(path) }
