package store

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestMatchQuery(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{`"`, ""},
		{"*", ""},
		{"What is the capital of France?", `"capital" OR "france"`},
		{"the what", `"the" OR "what"`}, // only stopwords: keep them
		{`foo"bar`, `"foo" OR "bar"`},
		{"NEAR(alpha beta)", `"near" OR "alpha" OR "beta"`},
		{"alpha AND NOT beta", `"alpha" OR "beta"`},
		{"text:alpha", `"text" OR "alpha"`},
		{"^alpha*", `"alpha"`},
		{"Alpha alpha ALPHA", `"alpha"`},
		{"café naïve", `"café" OR "naïve"`},
		{"日本語 テキスト", `"日本語" OR "テキスト"`},
	} {
		if got := MatchQuery(tc.in); got != tc.want {
			t.Errorf("MatchQuery(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	var many []string
	for i := range 100 {
		many = append(many, fmt.Sprintf("word%d", i))
	}
	if n := strings.Count(MatchQuery(strings.Join(many, " ")), " OR ") + 1; n != maxTerms {
		t.Errorf("100 distinct words gave %d terms, want %d", n, maxTerms)
	}
}

// User text is never FTS5 syntax: every input returns results or nothing, and inputs
// that contain a real word find the document that has it.
func TestSearchInjection(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	fx.put(t, "fruit.txt", "the alpha orchard grows apples", "beta testing of pears")
	fx.put(t, "other.txt", "gamma rays near the station", "a col of stuff")
	for _, tc := range []struct {
		q    string
		want string // a word some hit must contain; "" for no hits expected
	}{
		{`"`, ""},
		{`""`, ""},
		{`*`, ""},
		{`alpha*`, "alpha"},
		{`"alpha`, "alpha"},
		{`alpha"`, "alpha"},
		{`NEAR(`, "near"},
		{`NEAR(alpha beta, 2)`, "alpha"},
		{`OR`, ""},
		{`alpha OR`, "alpha"},
		{`AND NOT`, ""},
		{`alpha AND NOT beta`, "alpha"},
		{`NOT`, ""},
		{`col:alpha`, "alpha"},
		{`text:gamma`, "gamma"},
		{`{text}: gamma`, "gamma"},
		{`^alpha`, "alpha"},
		{`(alpha`, "alpha"},
		{`alpha)`, "alpha"},
		{`)(`, ""},
		{`((((`, ""},
		{`-alpha`, "alpha"},
		{`+alpha`, "alpha"},
		{`alpha:`, "alpha"},
		{`'; DROP TABLE chunks; --`, ""},
		{`'; DROP TABLE chunks; -- pears`, "pears"},
		{"\x00alpha", "alpha"},
		{"\xff\xfe alpha", "alpha"},
		{strings.Repeat("(", 5000) + "gamma", "gamma"},
		{`chunks_fts`, ""},
		{`rank:1`, ""},
		{"🙂 apples", "apples"},
		{"apple", "apples"}, // porter stemming
	} {
		hits, err := fx.db.SearchBM25(ctx, fx.ws.ID, tc.q, 5)
		if err != nil {
			t.Errorf("SearchBM25(%.40q): %v", tc.q, err)
			continue
		}
		if tc.want == "" {
			if len(hits) != 0 {
				t.Errorf("SearchBM25(%.40q) = %d hits, want none", tc.q, len(hits))
			}
			continue
		}
		if !slices.ContainsFunc(hits, func(h Hit) bool { return strings.Contains(h.Text, tc.want) }) {
			t.Errorf("SearchBM25(%.40q) = %+v, want a hit with %q", tc.q, hits, tc.want)
		}
	}
	if n := fx.count(t, `SELECT count(*) FROM chunks`); n != 4 {
		t.Errorf("chunks after injection attempts: %d, want 4", n)
	}
}

func TestSearchRankingAndScope(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	fx.put(t, "a.txt", "raft consensus raft leader raft election", "unrelated words here")
	fx.put(t, "b.txt", "a note that mentions raft once among many other words in a long sentence")
	other, _ := fx.db.EnsureWorkspace(ctx, "other")
	of, _ := fx.db.AddFolder(ctx, other.ID, "/elsewhere")
	if err := fx.db.ReplaceDocument(ctx, Document{WorkspaceID: other.ID, FolderID: of.ID, Path: "/elsewhere/c.txt", Rel: "c.txt"},
		[]Chunk{{Text: "raft raft raft raft"}}); err != nil {
		t.Fatal(err)
	}
	hits, err := fx.db.SearchBM25(ctx, fx.ws.ID, "how does raft work?", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 2 || hits[0].Rel != "a.txt" || hits[1].Rel != "b.txt" {
		t.Fatalf("hits = %+v, want a.txt then b.txt, none from the other workspace", hits)
	}
	if !(hits[0].Score > hits[1].Score && hits[1].Score > 0) {
		t.Errorf("scores %v, %v: want positive and descending", hits[0].Score, hits[1].Score)
	}
	if hits[0].LineStart != 1 || hits[0].Ordinal != 0 || hits[0].DocumentID == 0 {
		t.Errorf("hit location = %+v", hits[0])
	}
	if hits, _ := fx.db.SearchBM25(ctx, fx.ws.ID, "raft", 1); len(hits) != 1 {
		t.Errorf("limit 1 gave %d hits", len(hits))
	}

	// ChunkTexts keeps the order asked and drops unknown ids.
	ids := []int64{hits[0].ChunkID, 12345, hits[0].ChunkID - 1}
	if ids[2] <= 0 {
		ids[2] = hits[0].ChunkID + 1
	}
	got, err := fx.db.ChunkTexts(ctx, ids)
	if err != nil || len(got) != 2 || got[0].ChunkID != ids[0] || got[1].ChunkID != ids[2] || got[0].Text == "" {
		t.Errorf("ChunkTexts(%v) = %+v, %v", ids, got, err)
	}
	if got, err := fx.db.ChunkTexts(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("ChunkTexts(nil) = %v, %v", got, err)
	}
}

func TestEmbeddings(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	db := fx.db
	var texts []string
	for i := range 10 {
		texts = append(texts, strings.Repeat("w ", i+1))
	}
	id := fx.put(t, "a.txt", texts...)
	cs, _ := db.Chunks(ctx, id)

	// Page through missing chunks, embedding as we go.
	var seen []int64
	after := int64(0)
	for {
		batch, err := db.ChunksMissingEmbedding(ctx, fx.ws.ID, "m1", after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(batch) == 0 {
			break
		}
		var embs []Embedding
		for _, c := range batch {
			seen = append(seen, c.ID)
			embs = append(embs, Embedding{ChunkID: c.ID, Vec: []float32{float32(c.ID), -0.5, float32(math.Pi)}})
		}
		if err := db.PutEmbeddings(ctx, "m1", embs); err != nil {
			t.Fatal(err)
		}
		after = batch[len(batch)-1].ID
	}
	if len(seen) != 10 || !slices.IsSorted(seen) {
		t.Errorf("paged over %v, want 10 ids in order", seen)
	}
	if rest, _ := db.ChunksMissingEmbedding(ctx, fx.ws.ID, "m1", 0, 100); len(rest) != 0 {
		t.Errorf("%d chunks still missing m1", len(rest))
	}
	if rest, _ := db.ChunksMissingEmbedding(ctx, fx.ws.ID, "m2", 0, 100); len(rest) != 10 {
		t.Errorf("%d chunks missing m2, want 10", len(rest))
	}
	var got int
	err := db.Vectors(ctx, fx.ws.ID, "m1", 0, func(id int64, v []float32) error {
		if len(v) != 3 || v[0] != float32(id) || v[1] != -0.5 || v[2] != float32(math.Pi) {
			t.Errorf("vector %d = %v", id, v)
		}
		got++
		return nil
	})
	if err != nil || got != 10 {
		t.Errorf("Vectors streamed %d, %v", got, err)
	}
	stop := errorString("stop")
	if err := db.Vectors(ctx, fx.ws.ID, "m1", 0, func(int64, []float32) error { return stop }); err != stop {
		t.Errorf("Vectors did not pass fn's error back: %v", err)
	}
	// Vectors since a generation: only what was written after it; VectorIDs: all.
	g, err := db.Generation(ctx, fx.ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutEmbeddings(ctx, "m1", []Embedding{{ChunkID: cs[3].ID, Vec: []float32{1, 2, 3}}, {ChunkID: cs[7].ID, Vec: []float32{4, 5, 6}}}); err != nil {
		t.Fatal(err)
	}
	var since []int64
	if err := db.Vectors(ctx, fx.ws.ID, "m1", g, func(id int64, _ []float32) error { since = append(since, id); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(since, []int64{cs[3].ID, cs[7].ID}) {
		t.Errorf("Vectors since generation %d: %v, want chunks %d and %d", g, since, cs[3].ID, cs[7].ID)
	}
	if ids, err := db.VectorIDs(ctx, fx.ws.ID, "m1"); err != nil || len(ids) != 10 {
		t.Errorf("VectorIDs = %v, %v; want 10 ids", ids, err)
	} else if slices.Sort(ids); !slices.Equal(ids, seen) {
		t.Errorf("VectorIDs = %v, want %v", ids, seen)
	}
	for _, bad := range [][]Embedding{
		{{ChunkID: cs[0].ID}},
		{{ChunkID: cs[0].ID, Vec: []float32{float32(math.NaN())}}},
		{{ChunkID: cs[0].ID, Vec: []float32{float32(math.Inf(1))}}},
	} {
		if err := db.PutEmbeddings(ctx, "m1", bad); err == nil {
			t.Errorf("PutEmbeddings(%v) accepted", bad)
		}
	}
	if err := db.PutEmbeddings(ctx, "", []Embedding{{ChunkID: cs[0].ID, Vec: []float32{1}}}); err == nil {
		t.Error("empty model accepted")
	}
	// Re-indexing the document drops its embeddings.
	fx.put(t, "a.txt", "fresh text")
	if n := fx.count(t, `SELECT count(*) FROM embeddings`); n != 0 {
		t.Errorf("%d embeddings survived a replace", n)
	}
	if _, err := DecodeVector([]byte{1, 2, 3}); err == nil {
		t.Error("DecodeVector of 3 bytes: no error")
	}
	fx.check(t)
}

type errorString string

func (e errorString) Error() string { return string(e) }
