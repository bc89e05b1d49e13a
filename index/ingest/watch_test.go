package ingest

import (
	"context"
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
	errc := make(chan error, 1)
	go func() {
		errc <- ix.Watch(ctx, "w", []string{dir}, Options{Debounce: 100 * time.Millisecond}, func(s Summary, err error) {
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

	// A burst of writes is debounced into few runs.
	mu.Lock()
	before := len(runs)
	mu.Unlock()
	for i := range 20 {
		write(t, filepath.Join(dir, "burst.txt"), "burst number "+string(rune('a'+i)))
		time.Sleep(5 * time.Millisecond)
	}
	eventually("burst", "burst", []string{"burst.txt"})
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	burstRuns := len(runs) - before
	mu.Unlock()
	if burstRuns > 3 {
		t.Errorf("20 quick writes caused %d runs, want debouncing", burstRuns)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Watch returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not return after cancel")
	}
	if err := db.Check(context.Background()); err != nil {
		t.Error(err)
	}
}
