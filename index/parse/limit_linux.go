package parse

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// limitMemory lets a child's address space grow by at most bytes over what
// it has mapped now. It is set from outside, before the child is given any
// input, so the child cannot skip it; allocation past it fails inside the
// child (a Go worker dies with "out of memory"), never in this process.
func limitMemory(pid int, bytes int64) error {
	if bytes <= 0 {
		return nil
	}
	base, err := vmSize(pid)
	if err != nil {
		return fmt.Errorf("set memory limit: %w", err)
	}
	lim := unix.Rlimit{Cur: uint64(base + bytes), Max: uint64(base + bytes)}
	if err := unix.Prlimit(pid, unix.RLIMIT_AS, &lim, nil); err != nil {
		return fmt.Errorf("set memory limit: %w", err)
	}
	return nil
}

// vmSize is a process's mapped address space in bytes.
func vmSize(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmSize:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmSize for pid %d", pid)
}
