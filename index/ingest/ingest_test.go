package ingest

import (
	"context"
	"errors"
	"hash/fnv"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"lore/index/parse"
	"lore/store"
)

// hashEmbedder is a deterministic bag-of-words embedder: enough to tell whether and how
// often passages were embedded, without a model file.
type hashEmbedder struct {
	model string
	delay time.Duration
	fail  error

	mu    sync.Mutex
	calls int
	texts int
}

func (e *hashEmbedder) ModelID() string { return e.model }

func (e *hashEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if e.delay > 0 {
		select {
		case <-time.After(e.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if e.fail != nil {
		return nil, e.fail
	}
	e.mu.Lock()
	e.calls++
	e.texts += len(texts)
	e.mu.Unlock()
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, 8)
		for _, w := range strings.Fields(t) {
			h := fnv.New32a()
			h.Write([]byte(w))
			v[h.Sum32()%8]++
		}
		v[0] += 0.5 // never all zero
		out[i] = v
	}
	return out, nil
}

func (e *hashEmbedder) embedded() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.texts
}

func newIndexer(t testing.TB, e Embedder) (*Indexer, *store.DB) {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "lore.db"))
	if err != nil {
		t.Fatal(err)
	}
	p := parse.New(parse.Options{})
	t.Cleanup(func() { p.Close(); db.Close() })
	return &Indexer{DB: db, Parser: p, Embedder: e}, db
}

// write creates or replaces a file and gives it an mtime later than any before, so that
// edits within one clock tick still look like edits.
func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	bumpMtime(t, path)
}

var clock = time.Now().Add(-time.Hour)

func bumpMtime(t testing.TB, path string) {
	t.Helper()
	clock = clock.Add(time.Second)
	if err := os.Chtimes(path, clock, clock); err != nil {
		t.Fatal(err)
	}
}

func search(t *testing.T, db *store.DB, ws int64, q string) []string {
	t.Helper()
	hits, err := db.SearchBM25(context.Background(), ws, q, 20)
	if err != nil {
		t.Fatal(err)
	}
	var rels []string
	for _, h := range hits {
		if !slices.Contains(rels, h.Rel) {
			rels = append(rels, h.Rel)
		}
	}
	slices.Sort(rels)
	return rels
}

func TestIncremental(t *testing.T) {
	ctx := context.Background()
	emb := &hashEmbedder{model: "hash-8"}
	ix, db := newIndexer(t, emb)
	dir := t.TempDir()
	p := func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }

	type want struct {
		sum      Summary // Errors, SkippedFiles and Seconds not compared
		errs     int
		skipped  []string // base names of the files listed as skipped in this run
		embedded int      // passages sent to the embedder in this step
		bump     bool     // generation moved
		search   map[string][]string
	}
	steps := []struct {
		name string
		do   func()
		want want
	}{
		{"initial", func() {
			write(t, p("a.md"), "# Apples\n\nApples grow in orchards.\n")
			write(t, p("b.txt"), "Bananas are yellow.\n")
			write(t, p("sub/deep/c.txt"), "Cherries are small and red.\n")
		}, want{sum: Summary{Files: 3, Indexed: 3, Chunks: 3, Embedded: 3}, embedded: 3, bump: true,
			search: map[string][]string{"orchards": {"a.md"}, "cherries": {"sub/deep/c.txt"}}}},
		{"nothing changed", func() {},
			want{sum: Summary{Files: 3, Unchanged: 3}}},
		{"edit", func() { write(t, p("b.txt"), "Blueberries are blue, not yellow at all.\n") },
			want{sum: Summary{Files: 3, Indexed: 1, Unchanged: 2, Chunks: 1, Embedded: 1}, embedded: 1, bump: true,
				search: map[string][]string{"blueberries": {"b.txt"}, "bananas": nil}}},
		{"touch without change", func() { bumpMtime(t, p("b.txt")) },
			want{sum: Summary{Files: 3, Unchanged: 3}}},
		{"delete", func() { os.Remove(p("a.md")) },
			want{sum: Summary{Files: 2, Unchanged: 2, Deleted: 1}, bump: true,
				search: map[string][]string{"orchards": nil}}},
		{"rename", func() {
			os.MkdirAll(p("moved"), 0o755)
			if err := os.Rename(p("sub/deep/c.txt"), p("moved/c2.txt")); err != nil {
				t.Fatal(err)
			}
		}, want{sum: Summary{Files: 2, Unchanged: 1, Renamed: 1}, bump: true,
			search: map[string][]string{"cherries": {"moved/c2.txt"}}}},
		{"bad encoding", func() {
			// Shift-JIS bytes: not UTF-8 and not plausibly Windows-1252.
			os.WriteFile(p("sjis.txt"), []byte("\x93\xfa\x96\x7b\x8c\xea\x82\xcc\x83\x65\x83\x4c\x83\x58\x83\x67\n"), 0o644)
		}, want{sum: Summary{Files: 3, Unchanged: 2}, errs: 1}},
		{"error not retried", func() {},
			want{sum: Summary{Files: 3, Unchanged: 3}}},
		{"binary skipped", func() { os.WriteFile(p("blob.txt"), []byte("\x00\x01\x02binary\x00"), 0o644) },
			want{sum: Summary{Files: 3, Unchanged: 3, Skipped: 1}, skipped: []string{"blob.txt"}}},
		{"empty file", func() { write(t, p("empty.txt"), "") },
			want{sum: Summary{Files: 4, Unchanged: 3, Skipped: 2}, skipped: []string{"blob.txt", "empty.txt"}}},
		{"skips remembered", func() {},
			want{sum: Summary{Files: 4, Unchanged: 3, Skipped: 2}, skipped: []string{"blob.txt"}}},
	}
	for _, st := range steps {
		st.do()
		gen0, _ := db.Generation(ctx, 1)
		before := emb.embedded()
		sum, err := ix.Run(ctx, "main", []string{dir}, Options{})
		if err != nil {
			t.Fatalf("%s: Run: %v", st.name, err)
		}
		if len(sum.Errors) != st.want.errs {
			t.Errorf("%s: errors %+v, want %d", st.name, sum.Errors, st.want.errs)
		}
		var skipped []string
		for _, s := range sum.SkippedFiles {
			skipped = append(skipped, filepath.Base(s.Path))
		}
		if !slices.Equal(skipped, st.want.skipped) {
			t.Errorf("%s: skipped files %+v, want %v", st.name, sum.SkippedFiles, st.want.skipped)
		}
		got := sum
		got.Errors, got.SkippedFiles, got.Seconds = nil, nil, 0
		if !reflect.DeepEqual(got, st.want.sum) {
			t.Errorf("%s: summary\n got %+v\nwant %+v", st.name, got, st.want.sum)
		}
		if n := emb.embedded() - before; n != st.want.embedded {
			t.Errorf("%s: embedded %d passages, want %d", st.name, n, st.want.embedded)
		}
		if gen1, _ := db.Generation(ctx, 1); (gen1 != gen0) != st.want.bump {
			t.Errorf("%s: generation %d -> %d, want bump=%v", st.name, gen0, gen1, st.want.bump)
		}
		for q, rels := range st.want.search {
			if got := search(t, db, 1, q); !slices.Equal(got, rels) {
				t.Errorf("%s: search %q = %v, want %v", st.name, q, got, rels)
			}
		}
		if err := db.Check(ctx); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
	}
	d, err := db.DocumentByPath(ctx, 1, p("sjis.txt"))
	if err != nil || d.Status != store.StatusError || !strings.Contains(d.Error, "encoding") {
		t.Errorf("bad-encoding document = %+v, %v", d, err)
	}
	c, _ := db.Counts(ctx, 1, "hash-8")
	if c.Chunks != 2 || c.Embedded != 2 {
		t.Errorf("final counts %+v, want 2 chunks, all embedded", c)
	}
}

// A folder that cannot be read (an unmounted drive) is an error, not a mass deletion.
func TestMissingFolderKeepsDocuments(t *testing.T) {
	ctx := context.Background()
	ix, db := newIndexer(t, nil)
	base := t.TempDir()
	dir := filepath.Join(base, "drive")
	write(t, filepath.Join(dir, "a.txt"), "aardvarks dig burrows")
	write(t, filepath.Join(dir, "b.txt"), "badgers dig too")
	other := filepath.Join(base, "other")
	write(t, filepath.Join(other, "c.txt"), "cats do not dig")
	if _, err := ix.Run(ctx, "main", []string{dir, other}, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, filepath.Join(base, "unplugged")); err != nil {
		t.Fatal(err)
	}
	// No folders: the registered ones.
	sum, err := ix.Run(ctx, "main", nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Deleted != 0 || sum.Unchanged != 1 || len(sum.Errors) != 1 || sum.Errors[0].Path != dir {
		t.Errorf("summary %+v, want one error for %s and nothing deleted", sum, dir)
	}
	if got := search(t, db, 1, "dig"); len(got) != 3 {
		t.Errorf("search after losing the folder = %v, want all 3 files", got)
	}
}

func TestProgress(t *testing.T) {
	ctx := context.Background()
	ix, _ := newIndexer(t, &hashEmbedder{model: "m"})
	dir := t.TempDir()
	for _, n := range []string{"a", "b", "c", "d"} {
		write(t, filepath.Join(dir, n+".txt"), "text of "+n)
	}
	var mu sync.Mutex
	var phases []string
	var last, lastParse Progress
	var embeds []Progress
	_, err := ix.Run(ctx, "w", []string{dir}, Options{Progress: func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
			phases = append(phases, p.Phase)
		}
		switch p.Phase {
		case PhaseParse:
			lastParse = p
		case PhaseEmbed:
			embeds = append(embeds, p)
		}
		last = p
	}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{PhaseScan, PhaseParse, PhaseEmbed, PhaseDone}; !slices.Equal(phases, want) {
		t.Errorf("phases %v, want %v", phases, want)
	}
	if last.Phase != PhaseDone || last.FilesDone != 4 || last.Chunks != 4 {
		t.Errorf("last event %+v", last)
	}
	// Parsing four files takes far less than the 100 ms between events: the
	// final count must go out anyway.
	if lastParse.FilesDone != 4 || lastParse.FilesTotal != 4 {
		t.Errorf("last parse event %+v, want 4 / 4 files", lastParse)
	}
	if len(embeds) < 2 || embeds[len(embeds)-1].Chunks != 4 {
		t.Errorf("embed events %+v, want a start and a final one with 4 chunks", embeds)
	}
	for _, p := range embeds {
		if p.FilesDone != 4 || p.FilesTotal != 4 {
			t.Errorf("embed event %+v does not carry the 4 files", p)
		}
	}
}

func TestEmbedFailureKeepsParsedWork(t *testing.T) {
	ctx := context.Background()
	bad := &hashEmbedder{model: "m", fail: errors.New("model crashed")}
	ix, db := newIndexer(t, bad)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.txt"), "walruses")
	sum, err := ix.Run(ctx, "w", []string{dir}, Options{})
	if err == nil || !strings.Contains(err.Error(), "model crashed") {
		t.Fatalf("Run with failing embedder: %v", err)
	}
	if sum.Indexed != 1 {
		t.Errorf("summary %+v, want the file indexed anyway", sum)
	}
	if got := search(t, db, 1, "walruses"); len(got) != 1 {
		t.Errorf("BM25 lost the document: %v", got)
	}
	// Later, a working embedder catches up without re-parsing.
	ix.Embedder = &hashEmbedder{model: "m"}
	sum, err = ix.Run(ctx, "w", []string{dir}, Options{})
	if err != nil || sum.Indexed != 0 || sum.Embedded != 1 {
		t.Errorf("second run: %+v, %v", sum, err)
	}
	if n, err := ix.Embed(ctx, "w", Options{}); err != nil || n != 0 {
		t.Errorf("Embed with nothing left = %d, %v", n, err)
	}
	// Cancellation between batches: the embedder answers only once its
	// context ends, so the deadline, not a race with it, ends the call.
	ix.Embedder = &hashEmbedder{model: "other", delay: time.Hour}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := ix.Embed(cctx, "w", Options{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled Embed = %v", err)
	}
}
