package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestReplaceDocument(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	db := fx.db
	id := fx.put(t, "a.md", "apples are red", "bananas are yellow")
	d, err := db.Document(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != StatusIndexed || d.IndexedAt.IsZero() || !d.ModTime.Equal(fx.doc("a.md").ModTime) {
		t.Errorf("stored document = %+v", d)
	}
	// Replacing keeps the id and swaps the chunks.
	if id2 := fx.put(t, "a.md", "cherries are dark", "dates are sweet", "elderberries"); id2 != id {
		t.Errorf("replace changed the id: %d -> %d", id, id2)
	}
	cs, err := db.Chunks(ctx, id)
	if err != nil || len(cs) != 3 || cs[0].Text != "cherries are dark" || cs[1].LineStart != 2 {
		t.Errorf("Chunks = %+v, %v", cs, err)
	}
	if hits, _ := db.SearchBM25(ctx, fx.ws.ID, "apples", 5); len(hits) != 0 {
		t.Errorf("old text still found: %+v", hits)
	}
	// Invalid UTF-8 is repaired, not refused.
	if err := db.ReplaceDocument(ctx, fx.doc("bad.txt"), []Chunk{{Text: "caf\xe9 latte"}}); err != nil {
		t.Fatal(err)
	}
	hits, err := db.SearchBM25(ctx, fx.ws.ID, "latte", 5)
	if err != nil || len(hits) != 1 || hits[0].Text != "caf\uFFFD latte" {
		t.Errorf("invalid UTF-8 chunk: %+v, %v", hits, err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Document)
	}{
		{"no workspace", func(d *Document) { d.WorkspaceID = 0 }},
		{"no folder", func(d *Document) { d.FolderID = 0 }},
		{"no path", func(d *Document) { d.Path = "" }},
		{"bad status", func(d *Document) { d.Status = "done" }},
		{"missing folder", func(d *Document) { d.FolderID = 999 }},
	} {
		d := fx.doc("invalid.txt")
		tc.mod(&d)
		if err := db.ReplaceDocument(ctx, d, []Chunk{{Text: "never stored"}}); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if hits, _ := db.SearchBM25(ctx, fx.ws.ID, "never stored", 5); len(hits) != 0 {
		t.Errorf("rejected document searchable: %+v", hits)
	}
	fx.check(t)
}

// A failure half-way through a replace leaves the previous version whole.
func TestReplaceDocumentAtomic(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	id := fx.put(t, "a.md", "original first", "original second")
	gen, _ := fx.db.Generation(ctx, fx.ws.ID)
	d := fx.doc("a.md")
	d.Hash = "new"
	// The duplicate ordinal fails on the third insert, after the old chunks were deleted.
	err := fx.db.ReplaceDocument(ctx, d, []Chunk{{Ordinal: 0, Text: "new one"}, {Ordinal: 1, Text: "new two"}, {Ordinal: 1, Text: "dup"}})
	if err == nil {
		t.Fatal("duplicate ordinals accepted")
	}
	cs, _ := fx.db.Chunks(ctx, id)
	if len(cs) != 2 || cs[0].Text != "original first" {
		t.Errorf("chunks after failed replace = %+v", cs)
	}
	if got, _ := fx.db.Document(ctx, id); got.Hash != "h-a.md" {
		t.Errorf("document row changed by a failed replace: hash %q", got.Hash)
	}
	if hits, _ := fx.db.SearchBM25(ctx, fx.ws.ID, "new", 5); len(hits) != 0 {
		t.Errorf("half-written text searchable: %+v", hits)
	}
	if g, _ := fx.db.Generation(ctx, fx.ws.ID); g != gen {
		t.Errorf("generation moved on a failed replace: %d -> %d", gen, g)
	}
	fx.check(t)
}

// Readers see either all of a document's chunks or none of a version while it is
// being rewritten over and over.
func TestSearchNeverSeesHalfDocument(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fx := newFixture(t)
	const n = 40
	write := func(v int) error {
		cs := make([]Chunk, n)
		for i := range cs {
			cs[i] = Chunk{Ordinal: i, Text: fmt.Sprintf("kiwi v%d part %d", v, i)}
		}
		return fx.db.ReplaceDocument(ctx, fx.doc("kiwi.txt"), cs)
	}
	if err := write(0); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for v := 1; v <= 60; v++ {
			if err := write(v); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	reads := 0
	for {
		select {
		case <-done:
			wg.Wait()
			if reads < 5 {
				t.Errorf("only %d reads overlapped the writes", reads)
			}
			return
		default:
		}
		hits, err := fx.db.SearchBM25(ctx, fx.ws.ID, "kiwi", 2*n)
		if err != nil {
			t.Fatal(err)
		}
		reads++
		if len(hits) != n {
			t.Fatalf("search saw %d chunks, want %d", len(hits), n)
		}
		v := strings.Fields(hits[0].Text)[1]
		for _, h := range hits {
			if got := strings.Fields(h.Text)[1]; got != v {
				t.Fatalf("search mixed versions %s and %s", v, got)
			}
		}
	}
}

func TestRenameTouchDelete(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	db := fx.db
	id := fx.put(t, "old.txt", "mangoes ripen", "in summer")
	cs, _ := db.Chunks(ctx, id)
	if err := db.PutEmbeddings(ctx, "m", []Embedding{{ChunkID: cs[0].ID, Vec: []float32{1, 2}}, {ChunkID: cs[1].ID, Vec: []float32{3, 4}}}); err != nil {
		t.Fatal(err)
	}
	to := fx.doc("sub/new.txt")
	if err := db.RenameDocument(ctx, id, to); err != nil {
		t.Fatal(err)
	}
	d, _ := db.Document(ctx, id)
	if d.Path != to.Path || d.Rel != "sub/new.txt" {
		t.Errorf("renamed document = %+v", d)
	}
	cs2, _ := db.Chunks(ctx, id)
	if len(cs2) != 2 || cs2[0].ID != cs[0].ID {
		t.Errorf("rename changed chunks: %+v", cs2)
	}
	if n := fx.count(t, `SELECT count(*) FROM embeddings`); n != 2 {
		t.Errorf("rename kept %d of 2 embeddings", n)
	}
	hits, _ := db.SearchBM25(ctx, fx.ws.ID, "mangoes", 5)
	if len(hits) != 1 || hits[0].Path != to.Path {
		t.Errorf("search after rename = %+v", hits)
	}
	if err := db.RenameDocument(ctx, 999, to); !errors.Is(err, ErrNotFound) {
		t.Errorf("rename missing = %v, want ErrNotFound", err)
	}
	other := fx.put(t, "taken.txt", "x")
	if err := db.RenameDocument(ctx, other, to); err == nil {
		t.Error("rename onto an existing path: no error")
	}

	mt := time.Unix(1800000000, 5)
	if err := db.TouchDocument(ctx, id, 99, mt); err != nil {
		t.Fatal(err)
	}
	if d, _ := db.Document(ctx, id); d.Size != 99 || !d.ModTime.Equal(mt) {
		t.Errorf("touched document = %+v", d)
	}

	if err := db.MarkDocumentError(ctx, fx.doc("sub/new.txt"), "parse: broken"); err != nil {
		t.Fatal(err)
	}
	d, _ = db.Document(ctx, id)
	if d.Status != StatusError || d.Error != "parse: broken" {
		t.Errorf("errored document = %+v", d)
	}
	if cs, _ := db.Chunks(ctx, id); len(cs) != 0 {
		t.Errorf("errored document kept %d chunks", len(cs))
	}
	if err := db.DeleteDocument(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Document(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted document: %v", err)
	}
	if err := db.DeleteDocument(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
	docs, err := db.DocumentsByFolder(ctx, fx.f.ID)
	if err != nil || len(docs) != 1 || docs[0].Rel != "taken.txt" || docs[0].Hash != "h-taken.txt" {
		t.Errorf("DocumentsByFolder = %+v, %v", docs, err)
	}
	fx.check(t)
}

// Deleting a workspace removes everything below it, FTS rows included.
func TestCascade(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	db := fx.db
	id := fx.put(t, "a.txt", "quokka smiles", "quokka jumps")
	cs, _ := db.Chunks(ctx, id)
	if err := db.PutEmbeddings(ctx, "m", []Embedding{{ChunkID: cs[0].ID, Vec: []float32{1}}}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutTrace(ctx, TraceRecord{RequestID: "r", WorkspaceID: fx.ws.ID, Stages: map[string]float64{"a": 1}}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteWorkspace(ctx, fx.ws.ID); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"folders", "documents", "chunks", "embeddings", "traces", "trace_stages", "chunks_fts_docsize"} {
		if n := fx.count(t, `SELECT count(*) FROM `+table); n != 0 {
			t.Errorf("%s: %d rows left", table, n)
		}
	}
	if n := fx.count(t, `SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'quokka'`); n != 0 {
		t.Errorf("FTS index still matches %d deleted rows", n)
	}
	if err := db.DeleteWorkspace(ctx, fx.ws.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
	fx.check(t)
}

func TestGeneration(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	db := fx.db
	id := fx.put(t, "a.txt", "one", "two")
	cs, _ := db.Chunks(ctx, id)
	tests := []struct {
		name string
		op   func() error
		bump bool
	}{
		{"replace", func() error { return db.ReplaceDocument(ctx, fx.doc("b.txt"), []Chunk{{Text: "b"}}) }, true},
		{"embed", func() error { return db.PutEmbeddings(ctx, "m", []Embedding{{ChunkID: cs[0].ID, Vec: []float32{1}}}) }, true},
		{"embed deleted chunk", func() error { return db.PutEmbeddings(ctx, "m", []Embedding{{ChunkID: 9999, Vec: []float32{1}}}) }, false},
		{"rename", func() error { return db.RenameDocument(ctx, id, fx.doc("c.txt")) }, true},
		{"touch", func() error { return db.TouchDocument(ctx, id, 1, time.Now()) }, false},
		{"search", func() error { _, err := db.SearchBM25(ctx, fx.ws.ID, "one", 5); return err }, false},
		{"setting", func() error { return db.PutSetting(ctx, "k", 1) }, false},
		{"add folder", func() error { _, err := db.AddFolder(ctx, fx.ws.ID, "/other"); return err }, false},
		{"error", func() error { return db.MarkDocumentError(ctx, fx.doc("b.txt"), "bad") }, true},
		{"delete", func() error { return db.DeleteDocument(ctx, id) }, true},
		{"remove folder", func() error { return db.RemoveFolder(ctx, fx.ws.ID, "/other") }, true},
	}
	for _, tc := range tests {
		before, err := db.Generation(ctx, fx.ws.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := tc.op(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		after, _ := db.Generation(ctx, fx.ws.ID)
		if got := after > before; got != tc.bump {
			t.Errorf("%s: generation %d -> %d, want bump=%v", tc.name, before, after, tc.bump)
		}
	}
	if _, err := db.Generation(ctx, 999); !errors.Is(err, ErrNotFound) {
		t.Errorf("generation of a missing workspace: %v", err)
	}
}

func TestCounts(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	id := fx.put(t, "a.txt", "one", "two", "three")
	fx.db.MarkDocumentError(ctx, fx.doc("b.txt"), "bad")
	cs, _ := fx.db.Chunks(ctx, id)
	fx.db.PutEmbeddings(ctx, "m", []Embedding{{ChunkID: cs[0].ID, Vec: []float32{1}}})
	c, err := fx.db.Counts(ctx, fx.ws.ID, "m")
	if err != nil || c.Chunks != 3 || c.Embedded != 1 || c.Documents[StatusIndexed] != 1 || c.Documents[StatusError] != 1 {
		t.Errorf("Counts = %+v, %v", c, err)
	}
}

func TestReplaceWithoutChunksKeepsGeneration(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	d := fx.doc("skip.bin")
	d.Status = StatusSkipped
	if err := fx.db.ReplaceDocument(ctx, d, nil); err != nil {
		t.Fatal(err)
	}
	if g, _ := fx.db.Generation(ctx, fx.ws.ID); g != 0 {
		t.Errorf("generation %d after storing a document with no chunks, want 0", g)
	}
}

// TestReplaceKeepsVectors: a re-parsed or edited document keeps the
// embeddings of the chunks whose text did not change (under the new chunk
// ids and a newer generation, so the vector index picks them up); only the
// changed chunks are left to embed.
func TestReplaceKeepsVectors(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	db := fx.db
	id := fx.put(t, "a.md", "apples are red", "bananas are yellow", "apples are red")
	old, err := db.Chunks(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	vec := map[string][]float32{"apples are red": {1, 0}, "bananas are yellow": {0, 1}}
	for _, model := range []string{"m1", "m2"} {
		var embs []Embedding
		for _, c := range old {
			embs = append(embs, Embedding{ChunkID: c.ID, Vec: vec[c.Text]})
		}
		if err := db.PutEmbeddings(ctx, model, embs); err != nil {
			t.Fatal(err)
		}
	}
	before, err := db.EnsureWorkspace(ctx, fx.ws.Name)
	if err != nil {
		t.Fatal(err)
	}
	fx.put(t, "a.md", "cherries are dark", "bananas are yellow", "apples are red")
	now, err := db.Chunks(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"m1", "m2"} {
		missing, err := db.ChunksMissingEmbedding(ctx, fx.ws.ID, model, 0, 10)
		if err != nil || len(missing) != 1 || missing[0].Text != "cherries are dark" {
			t.Errorf("%s: to embed %+v %v, want only the changed chunk", model, missing, err)
		}
		got := map[int64][]float32{}
		if err := db.Vectors(ctx, fx.ws.ID, model, before.Generation, func(id int64, v []float32) error { got[id] = v; return nil }); err != nil {
			t.Fatal(err)
		}
		for _, c := range now {
			if want, ok := vec[c.Text]; ok && fmt.Sprint(got[c.ID]) != fmt.Sprint(want) {
				t.Errorf("%s: chunk %d %q has %v after generation %d, want its old vector %v", model, c.ID, c.Text, got[c.ID], before.Generation, want)
			}
		}
	}
	fx.check(t)
}

// TestStaleVectorSkipped: a document re-indexed while its chunks were being
// embedded can give a new chunk the old one's id (SQLite reuses the highest
// rowid); the vector of the old text is not stored on it.
func TestStaleVectorSkipped(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	db := fx.db
	fx.put(t, "a.md", "old text")
	todo, err := db.ChunksMissingEmbedding(ctx, fx.ws.ID, "m", 0, 10)
	if err != nil || len(todo) != 1 {
		t.Fatalf("to embed: %+v %v", todo, err)
	}
	id := fx.put(t, "a.md", "new text") // re-indexed while "old text" is being embedded
	now, err := db.Chunks(ctx, id)
	if err != nil || len(now) != 1 {
		t.Fatal(now, err)
	}
	if now[0].ID != todo[0].ID {
		t.Logf("the new chunk got id %d, not the old %d: the stale write is skipped as a deleted chunk", now[0].ID, todo[0].ID)
	}
	if err := db.PutEmbeddings(ctx, "m", []Embedding{{ChunkID: todo[0].ID, Vec: []float32{1, 0}, Text: todo[0].Text}}); err != nil {
		t.Fatal(err)
	}
	left, err := db.ChunksMissingEmbedding(ctx, fx.ws.ID, "m", 0, 10)
	if err != nil || len(left) != 1 || left[0].Text != "new text" {
		t.Errorf("after the stale write, to embed: %+v %v; want the new text still waiting", left, err)
	}
	if err := db.PutEmbeddings(ctx, "m", []Embedding{{ChunkID: left[0].ID, Vec: []float32{0, 1}, Text: left[0].Text}}); err != nil {
		t.Fatal(err)
	}
	if left, _ := db.ChunksMissingEmbedding(ctx, fx.ws.ID, "m", 0, 10); len(left) != 0 {
		t.Errorf("the current text's vector was not stored: %+v", left)
	}
	fx.check(t)
}
