package kv

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKilledUnderPressure: a process writing states far beyond the disk
// budget is killed with SIGKILL mid-stream; the store reopened over its
// folder fits the budget, has no temporary files left, and every state it
// returns is one that was written, byte for byte.
func TestKilledUnderPressure(t *testing.T) {
	const budget = 64 << 10
	if dir := os.Getenv("LORE_KV_CHILD"); dir != "" {
		s, err := Open(Options{Dir: dir, RAMBytes: -1, DiskBytes: budget})
		if err != nil {
			os.Exit(2)
		}
		for i := 0; ; i++ {
			toks := []int{i}
			s.Put(key("m", toks), entry(toks, 5000+i%3000))
			fmt.Println(i) // one line per state written, for the parent to count
		}
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledUnderPressure$")
	cmd.Env = append(os.Environ(), "LORE_KV_CHILD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill once it has written well past the budget (40 states of 5 to 8
	// kB, about four budgets), while it goes on writing. A child that
	// stops writing is killed after a minute, and fails the count.
	watchdog := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	written := 0
	for sc := bufio.NewScanner(out); written < 40 && sc.Scan(); {
		written++
	}
	watchdog.Stop()
	cmd.Process.Kill()
	cmd.Wait()
	if written < 40 {
		t.Fatalf("the child wrote %d states, then stopped", written)
	}

	s, err := Open(Options{Dir: dir, RAMBytes: -1, DiskBytes: budget})
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.DiskBytes > budget || st.DiskFiles == 0 {
		t.Fatalf("after the kill: %+v (budget %d)", st, budget)
	}
	ents, _ := os.ReadDir(dir)
	found := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), tmpExt) {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
	// The files are named by key hash: probe the keys the child wrote.
	for i := 0; i < 1_000_000 && found < len(ents); i++ {
		toks := []int{i}
		k := key("m", toks)
		if _, err := os.Stat(filepath.Join(dir, k.file())); err != nil {
			continue
		}
		found++
		got, ok := s.Get(k)
		if !ok {
			continue // cut short by the kill: discarded, never returned
		}
		if want := entry(toks, 5000+i%3000); string(got.Data) != string(want.Data) {
			t.Fatalf("state %d: %d bytes, not what was written", i, len(got.Data))
		}
	}
	if found == 0 {
		t.Fatal("no state of the child's found")
	}
	t.Logf("%d states on disk after the kill, %d bytes", found, s.Stats().DiskBytes)
}
