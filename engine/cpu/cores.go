package cpu

import (
	"bufio"
	"os"
	"runtime"
	"strings"
)

// PhysicalCores is the default thread count: llama.cpp gains nothing from
// SMT siblings and loses to their contention.
func PhysicalCores() int {
	if n := linuxPhysicalCores("/proc/cpuinfo"); n > 0 {
		return n
	}
	return max(runtime.NumCPU(), 1)
}

// linuxPhysicalCores counts distinct (physical id, core id) pairs.
func linuxPhysicalCores(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	cores := map[string]bool{}
	var phys, core string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			if core != "" {
				cores[phys+"/"+core] = true
			}
			phys, core = "", ""
			continue
		}
		switch strings.TrimSpace(k) {
		case "physical id":
			phys = strings.TrimSpace(v)
		case "core id":
			core = strings.TrimSpace(v)
		}
	}
	if core != "" {
		cores[phys+"/"+core] = true
	}
	return len(cores)
}
