//go:build !unix

package parse

import "os"

func alive(pid int) bool {
	_, err := os.FindProcess(pid) // fails on Windows once the process is gone
	return err == nil
}
