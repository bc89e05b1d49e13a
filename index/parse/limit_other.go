//go:build !linux

package parse

// limitMemory is a no-op where there is no prlimit: the byte caps, the
// worker's soft Go memory limit and the timeout still apply.
func limitMemory(pid int, bytes int64) error { return nil }
