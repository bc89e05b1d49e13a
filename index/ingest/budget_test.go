package ingest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lore/index/chunk"
	"lore/index/parse"
	"lore/index/walk"
	"lore/store"
)

// newWorkerIndexer is newIndexer with DOCX and HTML parsed in a supervised worker (this
// test binary, see TestMain) under the parser's default limits, as the app runs it.
func newWorkerIndexer(t testing.TB) (*Indexer, *store.DB) {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "lore.db"))
	if err != nil {
		t.Fatal(err)
	}
	p := parse.New(parse.Options{WorkerCmd: []string{os.Args[0], parse.WorkerArg}})
	t.Cleanup(func() { p.Close(); db.Close() })
	return &Indexer{DB: db, Parser: p}, db
}

// Pathological text: what minified code, data exports and logs look like.
func minified(n int) string {
	return strings.Repeat(`{"id":12345,"name":"widget","tags":["a","b"]},`, n/46+1)[:n]
}

// TestCancelMidDocument cancels a run while it chunks a 20 MB one-line file (the file
// that once hung indexing for good): Run must return at once, leave a consistent store,
// and a second run must finish the job.
func TestCancelMidDocument(t *testing.T) {
	ctx := context.Background()
	ix, db := newWorkerIndexer(t)
	dir := t.TempDir()
	for i := range 50 {
		write(t, filepath.Join(dir, fmt.Sprintf("note%02d.md", i)), fmt.Sprintf("# Note %d\n\nAbout smallnote%d.\n", i, i))
	}
	write(t, filepath.Join(dir, "huge.md"), "hugemarker "+minified(20<<20))

	// Cancel from inside the chunker, once it holds the huge text: a cancel that lands
	// mid-document, whatever the machine's speed. Chunking it all counts the tokens of
	// thousands of pieces of it; a chunker that stops counts a few more at most.
	rctx, cancel := context.WithCancel(ctx)
	var canceled time.Time
	var once sync.Once
	var after atomic.Int64 // pieces of the huge text counted after the cancel
	count := func(s string) int {
		if len(s) > 10<<20 {
			once.Do(func() { canceled = time.Now(); cancel() })
		} else if rctx.Err() != nil && strings.Contains(s, `{"id":12345`) {
			after.Add(1)
		}
		return chunk.Approx(s)
	}
	sum, err := ix.Run(rctx, "c", []string{dir}, Options{Chunk: chunk.Options{Count: count}})
	if canceled.IsZero() {
		t.Fatalf("the huge file was never chunked: %+v, %v", sum, err)
	}
	t.Logf("Run returned %v after the cancel, %d documents indexed, %d pieces of the huge text counted after it",
		time.Since(canceled), sum.Indexed, after.Load())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want Canceled", err)
	}
	if n := after.Load(); n > 64 {
		t.Errorf("the chunker went on after the cancel: %d more pieces of the huge text counted", n)
	}
	if err := db.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if d, err := db.DocumentByPath(ctx, 1, filepath.Join(dir, "huge.md")); err == nil && d.Status == store.StatusIndexed {
		t.Errorf("the huge file was stored although its chunking was cancelled: %+v", d)
	}

	sum, err = ix.Run(ctx, "c", []string{dir}, Options{})
	if err != nil || len(sum.Errors) != 0 || sum.Indexed+sum.Unchanged != 51 {
		t.Fatalf("second run: %+v, %v", sum, err)
	}
	if got := search(t, db, 1, "hugemarker"); len(got) != 1 || got[0] != "huge.md" {
		t.Errorf("search hugemarker = %q", got)
	}
	if err := db.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestDocBudget gives one document more work than its budget allows, once with work
// that checks its context (a slow chunker) and once with work that never returns: each
// must be recorded as an error naming the budget while the run goes on.
func TestDocBudget(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		count func(release <-chan struct{}) func(string) int
	}{
		{"slow work", func(<-chan struct{}) func(string) int {
			return func(s string) int {
				if strings.Contains(s, "slowmarker") {
					time.Sleep(20 * time.Millisecond)
				}
				return chunk.Approx(s)
			}
		}},
		{"work that never returns", func(release <-chan struct{}) func(string) int {
			return func(s string) int {
				if strings.Contains(s, "slowmarker") {
					<-release
				}
				return chunk.Approx(s)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ix, db := newIndexer(t, nil)
			dir := t.TempDir()
			write(t, filepath.Join(dir, "a.txt"), "alpha")
			write(t, filepath.Join(dir, "slow.txt"), strings.Repeat("slowmarker words. ", 20000))
			write(t, filepath.Join(dir, "z.txt"), "omega")
			release := make(chan struct{})
			defer close(release)
			start := time.Now()
			sum, err := ix.Run(ctx, "b", []string{dir}, Options{DocTimeout: 300 * time.Millisecond, Chunk: chunk.Options{Count: tc.count(release)}})
			t.Logf("run took %v: %+v", time.Since(start), sum.Errors)
			if err != nil || sum.Indexed != 2 || len(sum.Errors) != 1 {
				t.Fatalf("Run = %+v, %v; want 2 indexed and 1 error", sum, err)
			}
			if e := sum.Errors[0]; filepath.Base(e.Path) != "slow.txt" || !strings.Contains(e.Reason, ErrOverBudget.Error()) || !strings.Contains(e.Reason, "300ms") {
				t.Errorf("error %+v, want slow.txt over its 300ms budget", e)
			}
			d, err := db.DocumentByPath(ctx, 1, filepath.Join(dir, "slow.txt"))
			if err != nil || d.Status != store.StatusError {
				t.Errorf("slow.txt stored as %+v, %v; want an error record", d, err)
			}
			// Not retried until it changes.
			if again, err := ix.Run(ctx, "b", []string{dir}, Options{DocTimeout: 300 * time.Millisecond}); err != nil || len(again.Errors) != 0 || again.Unchanged != 3 {
				t.Errorf("second run: %+v, %v", again, err)
			}
		})
	}
}

// TestFollowOutside checks the per-folder opt-in to links that leave the folder.
func TestFollowOutside(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	a, b, secret := filepath.Join(base, "a"), filepath.Join(base, "b"), filepath.Join(base, "secret")
	write(t, filepath.Join(secret, "s.txt"), "the hiddenotter lives here")
	write(t, filepath.Join(a, "own.txt"), "own file of a")
	write(t, filepath.Join(b, "own.txt"), "own file of b")
	for _, d := range []string{a, b} {
		if err := os.Symlink(filepath.Join(secret, "s.txt"), filepath.Join(d, "link.txt")); err != nil {
			t.Fatal(err)
		}
	}
	ix, db := newIndexer(t, nil)
	sum, err := ix.Run(ctx, "w", []string{a, b}, Options{})
	if err != nil || sum.Indexed != 2 || len(sum.SkippedFiles) != 2 {
		t.Fatalf("default run: %+v, %v; want the two own files and both links skipped", sum, err)
	}
	for _, s := range sum.SkippedFiles {
		if filepath.Base(s.Path) != "link.txt" || s.Reason != walk.SkipOutside {
			t.Errorf("skipped %+v, want link.txt as %q", s, walk.SkipOutside)
		}
	}
	if got := search(t, db, 1, "hiddenotter"); len(got) != 0 {
		t.Errorf("outside file indexed by default: %q", got)
	}
	sum, err = ix.Run(ctx, "w", []string{a, b}, Options{FollowOutside: func(folder string) bool { return folder == b }})
	if err != nil || sum.Indexed != 1 {
		t.Fatalf("opt-in run: %+v, %v", sum, err)
	}
	if got := search(t, db, 1, "hiddenotter"); len(got) != 1 || got[0] != "link.txt" {
		t.Errorf("search after opting b in = %q, want b's link.txt", got)
	}
	if d, err := db.DocumentByPath(ctx, 1, filepath.Join(b, "link.txt")); err != nil || d.Status != store.StatusIndexed {
		t.Errorf("b/link.txt = %+v, %v; want indexed", d, err)
	}
}
