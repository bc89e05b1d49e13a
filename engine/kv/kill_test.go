package kv

import (
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
		}
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledUnderPressure$")
	cmd.Env = append(os.Environ(), "LORE_KV_CHILD="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill once it has written well past the budget.
	for deadline := time.Now().Add(30 * time.Second); ; {
		if n, _ := os.ReadDir(dir); len(n) > 12 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	cmd.Process.Kill()
	cmd.Wait()

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
