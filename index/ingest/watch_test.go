package ingest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ix, db := newIndexer(t, &hashEmbedder{model: "m"})
	dir := t.TempDir()
	write(t, filepath.Join(dir, "top.txt"), "penguins live in the south")

	var mu sync.Mutex
	var runs []Summary
	runsNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(runs)
	}
	const debounce = 100 * time.Millisecond
	errc := make(chan error, 1)
	go func() {
		errc <- ix.Watch(ctx, "w", []string{dir}, Options{Debounce: debounce}, func(s Summary, err error) {
			if err != nil {
				t.Errorf("watch run: %v", err)
			}
			mu.Lock()
			runs = append(runs, s)
			mu.Unlock()
		})
	}()
	// eventually waits until the store answers query with want.
	eventually := func(step, query string, want []string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		var got []string
		for time.Now().Before(deadline) {
			if got = search(t, db, 1, query); slices.Equal(got, want) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: search %q = %v, want %v", step, query, got, want)
	}
	eventually("initial run", "penguins", []string{"top.txt"})

	// New nested folders appear after the watch started; a file lands at the bottom. The
	// edit below is seen only if the watcher added the new folders.
	deep := filepath.Join(dir, "a", "b", "c")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(deep, "note.md")
	write(t, file, "# Otters\n\nOtters hold hands while sleeping.\n")
	eventually("create", "otters", []string{"a/b/c/note.md"})

	write(t, file, "# Otters\n\nOtters use stones as tools.\n")
	eventually("edit", "stones", []string{"a/b/c/note.md"})
	eventually("edit", "sleeping", nil)

	// A file in a folder created after the watch, inside the already-watched tree.
	write(t, filepath.Join(deep, "d", "e.txt"), "emus cannot fly")
	eventually("create in new folder", "emus", []string{"a/b/c/d/e.txt"})

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	eventually("delete", "otters", nil)

	// A burst of writes is debounced into few runs: 20 writes 5 ms apart,
	// more than a run takes here, so that without the debounce each would
	// start one. The bound holds for writes that all came well within the
	// debounce of each other: should the machine have stalled the writer
	// longer, the burst is written again.
	burst := filepath.Join(dir, "burst.txt")
	tested := false
	for round := 0; round < 3 && !tested; round++ {
		before := runsNow()
		var gap time.Duration
		last := time.Now()
		for i := range 20 {
			write(t, burst, fmt.Sprintf("burst r%dw%d", round, i))
			gap, last = max(gap, time.Since(last)), time.Now()
			time.Sleep(5 * time.Millisecond)
		}
		eventually("burst", fmt.Sprintf("r%dw19", round), []string{"burst.txt"})
		// A run the burst's last events start comes within a debounce of
		// them: wait until none came for three (a run counted late, on a
		// loaded machine, only lowers the count).
		quiet, deadline := time.Now(), time.Now().Add(time.Minute)
		for n := runsNow(); time.Since(quiet) < 3*debounce; time.Sleep(10 * time.Millisecond) {
			if m := runsNow(); m != n {
				n, quiet = m, time.Now()
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: runs still coming a minute after the burst (%d)", round, runsNow()-before)
			}
		}
		burstRuns := runsNow() - before
		if gap >= debounce/2 {
			t.Logf("round %d: writes up to %v apart, not a burst (%d runs); again", round, gap, burstRuns)
			continue
		}
		tested = true
		if burstRuns > 3 {
			t.Errorf("20 quick writes (at most %v apart) caused %d runs, want debouncing", gap, burstRuns)
		}
	}
	if !tested {
		t.Log("the machine never wrote a burst within the debounce: debouncing not checked")
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Watch returned %v", err)
		}
	case <-time.After(time.Minute): // a hang, not a slow machine
		t.Fatal("Watch did not return after cancel")
	}
	if err := db.Check(context.Background()); err != nil {
		t.Error(err)
	}
}
