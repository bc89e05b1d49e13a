package cpu

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLinuxPhysicalCores(t *testing.T) {
	// Two sockets, two cores each, two SMT siblings per core: 4 physical cores.
	var info string
	for _, p := range []string{"0", "1"} {
		for _, c := range []string{"0", "1"} {
			for range 2 {
				info += "processor\t: x\nphysical id\t: " + p + "\ncore id\t\t: " + c + "\n\n"
			}
		}
	}
	path := filepath.Join(t.TempDir(), "cpuinfo")
	os.WriteFile(path, []byte(info), 0o644)
	if got := linuxPhysicalCores(path); got != 4 {
		t.Fatalf("cores = %d, want 4", got)
	}
	if got := linuxPhysicalCores(filepath.Join(t.TempDir(), "missing")); got != 0 {
		t.Fatalf("missing file: %d", got)
	}
	if PhysicalCores() < 1 {
		t.Fatal("PhysicalCores < 1")
	}
}
