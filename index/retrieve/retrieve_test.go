package retrieve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"lore/index/vector"
	"lore/store"
)

const carQuery = "automobile maintenance qz7731"

func TestHybridFindsWhatEachRetrieverAloneFinds(t *testing.T) {
	f := newFixture(t)
	f.seedCars()
	emb := &conceptEmbedder{}
	f.embed(emb)
	r := f.retriever(emb, Config{})

	res, err := r.Search(f.ctx, f.ws, carQuery, Options{TopK: 10, Candidates: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != ModeHybrid || res.Degraded != "" {
		t.Fatalf("mode %q (%q), want hybrid", res.Mode, res.Degraded)
	}
	garage, ok := passageByRel(res, "garage.md")
	if !ok {
		t.Fatalf("garage.md (found only by vectors) missing from %v", rels(res))
	}
	if garage.Scores.VectorRank == 0 || garage.Scores.BM25Rank != 0 || garage.Scores.Vector <= 0 {
		t.Errorf("garage.md scores %+v, want a vector rank and no BM25 rank", garage.Scores)
	}
	// Its text and location come from the store, as BM25's hits do.
	if !strings.Contains(garage.Text, "brakes") || garage.LineStart != 1 || garage.Heading != "Hgarage.md" || garage.DocID == 0 {
		t.Errorf("garage.md passage not filled in: %+v", garage)
	}
	ledger, ok := passageByRel(res, "ledger.md")
	if !ok {
		t.Fatalf("ledger.md (found only by BM25) missing from %v", rels(res))
	}
	if ledger.Scores.BM25Rank == 0 || ledger.Scores.VectorRank != 0 || ledger.Scores.BM25 <= 0 {
		t.Errorf("ledger.md scores %+v, want a BM25 rank and no vector rank", ledger.Scores)
	}
	for i := 1; i < len(res.Passages); i++ {
		if res.Passages[i].Scores.Fused > res.Passages[i-1].Scores.Fused {
			t.Errorf("passages not in fused order at %d: %v", i, rels(res))
		}
	}
	// Each step is timed, the vector search after the embedding, all within Total.
	tm := res.Timing
	if tm.BM25.Ms <= 0 || tm.Embed.Ms <= 0 || tm.Vector.Ms <= 0 || tm.Total.Ms <= 0 {
		t.Errorf("untimed step: %+v", tm)
	}
	if tm.Vector.Start < tm.Embed.Start+tm.Embed.Ms {
		t.Errorf("vector search started at %.3f ms, before the embedding ended at %.3f", tm.Vector.Start, tm.Embed.Start+tm.Embed.Ms)
	}
	for name, s := range map[string]Step{"bm25": tm.BM25, "vector": tm.Vector, "fuse": tm.Fuse, "fetch": tm.Fetch} {
		if s.Start < 0 || s.Start+s.Ms > tm.Total.Ms+0.001 {
			t.Errorf("%s step %+v outside total %.3f ms", name, s, tm.Total.Ms)
		}
	}
}

func TestDegradedModes(t *testing.T) {
	f := newFixture(t)
	f.seedCars()
	f.embed(&conceptEmbedder{})
	for _, tc := range []struct {
		name     string
		emb      Embedder
		degraded string
	}{
		{"no embedder", nil, "no embedding model"},
		{"embedder fails", &conceptEmbedder{fail: errEmbedDown}, "query embedding failed: " + errEmbedDown.Error()},
		{"model never embedded", &conceptEmbedder{model: "other-model"}, "no passages embedded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.retriever(tc.emb, Config{})
			res, err := r.Search(f.ctx, f.ws, carQuery, Options{})
			if err != nil {
				t.Fatalf("search failed instead of degrading: %v", err)
			}
			if res.Mode != ModeBM25 || !strings.Contains(res.Degraded, tc.degraded) {
				t.Errorf("mode %q degraded %q, want bm25 with %q", res.Mode, res.Degraded, tc.degraded)
			}
			if _, ok := passageByRel(res, "ledger.md"); !ok {
				t.Errorf("BM25 result lacks ledger.md: %v", rels(res))
			}
			if _, ok := passageByRel(res, "garage.md"); ok {
				t.Errorf("garage.md shares no word with the query yet came back without vectors")
			}
			if err := r.Refresh(f.ctx, f.ws); err != nil {
				t.Errorf("refresh: %v", err)
			}
		})
	}
}

func TestDecideMode(t *testing.T) {
	bad := errors.New("boom")
	for _, tc := range []struct {
		bm, vec        error
		mode, degraded string
		fails          bool
	}{
		{nil, nil, ModeHybrid, "", false},
		{nil, bad, ModeBM25, "boom", false},
		{bad, nil, ModeVector, "bm25 failed: boom", false},
		{bad, bad, "", "", true},
	} {
		mode, degraded, err := decideMode(tc.bm, tc.vec)
		if mode != tc.mode || degraded != tc.degraded || (err != nil) != tc.fails {
			t.Errorf("decideMode(%v, %v) = %q, %q, %v", tc.bm, tc.vec, mode, degraded, err)
		}
	}
}

func TestCaches(t *testing.T) {
	f := newFixture(t)
	f.seedCars()
	emb := &conceptEmbedder{}
	f.embed(emb)
	r := f.retriever(emb, Config{})
	opt := Options{TopK: 5}
	base := emb.calls.Load() // the corpus's embedding

	first, err := r.Search(f.ctx, f.ws, carQuery, opt)
	if err != nil {
		t.Fatal(err)
	}
	if first.CacheHit || first.EmbedCacheHit {
		t.Fatalf("first search reported a cache hit: %+v", first)
	}
	// Same query up to case and spacing: served whole from the cache.
	again, err := r.Search(f.ctx, f.ws, "  Automobile   MAINTENANCE\tqz7731 ", opt)
	if err != nil {
		t.Fatal(err)
	}
	if !again.CacheHit || !slices.Equal(rels(again), rels(first)) {
		t.Fatalf("repeat: cache hit %v, passages %v, want hit with %v", again.CacheHit, rels(again), rels(first))
	}
	// A caller may reorder its result (Rerank does); the cache keeps its own copy.
	slices.Reverse(again.Passages)
	if third, _ := r.Search(f.ctx, f.ws, carQuery, opt); !slices.Equal(rels(third), rels(first)) {
		t.Fatalf("cached result changed by a caller: %v", rels(third))
	}
	// Other options are another entry.
	if other, _ := r.Search(f.ctx, f.ws, carQuery, Options{TopK: 2}); other.CacheHit || len(other.Passages) != 2 {
		t.Errorf("TopK 2: cache hit %v, %d passages", other.CacheHit, len(other.Passages))
	}
	if n := emb.calls.Load() - base; n != 1 {
		t.Errorf("embedder called %d times for queries, want 1", n)
	}

	// New content moves the generation: the cached result is stale, the
	// query embedding is not.
	f.put("dealer.md", "Automobile dealer offers maintenance plans.")
	f.embed(emb)
	if err := r.Refresh(f.ctx, f.ws); err != nil {
		t.Fatal(err)
	}
	fresh, err := r.Search(f.ctx, f.ws, carQuery, opt)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.CacheHit || !fresh.EmbedCacheHit || fresh.Generation <= first.Generation {
		t.Errorf("after a change: cache hit %v, embed cache hit %v, generation %d→%d",
			fresh.CacheHit, fresh.EmbedCacheHit, first.Generation, fresh.Generation)
	}
	if _, ok := passageByRel(fresh, "dealer.md"); !ok {
		t.Errorf("new document missing: %v", rels(fresh))
	}
	st := r.Stats()
	if st.ResultHits != 2 || st.EmbedHits != 2 || st.EmbedMisses != 1 {
		t.Errorf("stats %+v, want 2 result hits, 2 embed hits, 1 embed miss", st)
	}
}

func TestResultCacheSkipsFailures(t *testing.T) {
	f := newFixture(t)
	f.seedCars()
	emb := &conceptEmbedder{}
	f.embed(emb)
	r := f.retriever(emb, Config{})
	emb.fail = errEmbedDown
	if res, err := r.Search(f.ctx, f.ws, carQuery, Options{}); err != nil || res.Mode != ModeBM25 {
		t.Fatalf("mode %q err %v, want bm25", res.Mode, err)
	}
	emb.fail = nil
	res, err := r.Search(f.ctx, f.ws, carQuery, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.CacheHit || res.Mode != ModeHybrid {
		t.Errorf("after the embedder recovered: cache hit %v mode %q, want a fresh hybrid result", res.CacheHit, res.Mode)
	}
}

func TestLRU(t *testing.T) {
	c := newLRU[string, int](2)
	c.put("a", 1)
	c.put("b", 2)
	c.get("a", nil) // a is now the most recent
	c.put("c", 3)   // evicts b
	for _, tc := range []struct {
		key  string
		want int
		ok   bool
	}{{"a", 1, true}, {"b", 0, false}, {"c", 3, true}} {
		if v, ok := c.get(tc.key, nil); v != tc.want || ok != tc.ok {
			t.Errorf("get(%q) = %d, %v; want %d, %v", tc.key, v, ok, tc.want, tc.ok)
		}
	}
	if _, ok := c.get("a", func(v int) bool { return v != 1 }); ok {
		t.Error("invalid entry returned")
	}
	if c.len() != 1 {
		t.Errorf("invalid entry kept: len %d", c.len())
	}
}

func TestFuse(t *testing.T) {
	hit := func(id int64) store.Ranked { return store.Ranked{ChunkID: id, Score: float64(10 - id)} }
	vec := func(id int64) vector.Result { return vector.Result{ID: id, Score: 0.5} }
	for _, tc := range []struct {
		name string
		bm   []store.Ranked
		vec  []vector.Result
		want []int64
	}{
		{"empty", nil, nil, nil},
		{"bm25 only", []store.Ranked{hit(3), hit(1)}, nil, []int64{3, 1}},
		{"vector only", nil, []vector.Result{vec(2), vec(5)}, []int64{2, 5}},
		// 4 is second in both lists: 2/62 beats 1/61.
		{"agreement wins", []store.Ranked{hit(1), hit(4)}, []vector.Result{vec(2), vec(4)}, []int64{4, 1, 2}},
		// 1 and 2 tie at 1/61: the lower id first, deterministically.
		{"tie", []store.Ranked{hit(2)}, []vector.Result{vec(1)}, []int64{1, 2}},
		{"repeat keeps best rank", []store.Ranked{hit(1), hit(1)}, nil, []int64{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fuse(tc.bm, tc.vec)
			var ids []int64
			for _, c := range got {
				ids = append(ids, c.id)
			}
			if !slices.Equal(ids, tc.want) {
				t.Fatalf("order %v, want %v", ids, tc.want)
			}
		})
	}
	got := fuse([]store.Ranked{hit(1), hit(4)}, []vector.Result{vec(2), vec(4)})
	if s := got[0].scores; s.BM25Rank != 2 || s.VectorRank != 2 || s.Fused != 2.0/62 || s.BM25 != 6 || s.Vector != 0.5 {
		t.Errorf("scores of the fused first %+v", s)
	}
}

func TestEmptyQuery(t *testing.T) {
	f := newFixture(t)
	f.seedCars()
	emb := &conceptEmbedder{}
	f.embed(emb)
	r := f.retriever(emb, Config{})
	for _, q := range []string{"", "   ", "\t\n"} {
		res, err := r.Search(f.ctx, f.ws, q, Options{})
		if err != nil || len(res.Passages) != 0 {
			t.Errorf("Search(%q) = %d passages, %v", q, len(res.Passages), err)
		}
	}
	if n := emb.calls.Load(); n != 1 { // the corpus embedding only
		t.Errorf("embedder called %d times for empty queries", n-1)
	}
}

func TestDeletedDocumentNeverReturned(t *testing.T) {
	f := newFixture(t)
	f.seedCars()
	emb := &conceptEmbedder{}
	f.embed(emb)
	r := f.retriever(emb, Config{})
	if err := r.Refresh(f.ctx, f.ws); err != nil {
		t.Fatal(err)
	}
	garage, err := f.db.DocumentByPath(f.ctx, f.ws, "/docs/garage.md")
	if err != nil {
		t.Fatal(err)
	}
	gone := f.chunkIDs(garage.ID)
	if err := f.db.DeleteDocument(f.ctx, garage.ID); err != nil {
		t.Fatal(err)
	}
	// Straight away: the index may still hold the chunk, the result must not.
	res, err := r.Search(f.ctx, f.ws, carQuery, Options{TopK: 10, NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Passages {
		if p.Rel == "garage.md" || slices.Contains(gone, p.ChunkID) {
			t.Errorf("deleted chunk %d returned before the refresh (stale %v)", p.ChunkID, res.VectorStale)
		}
	}
	if !res.VectorStale {
		t.Error("search right after the delete did not use the lagging index; the test misses its case")
	}
	if err := r.Refresh(f.ctx, f.ws); err != nil {
		t.Fatal(err)
	}
	v := r.state(f.ws, emb.ID()).view()
	q, _ := emb.Embed(f.ctx, []string{"car repair vehicle service"})
	for _, h := range v.idx.Search(q[0], 100) {
		if slices.Contains(gone, h.ID) {
			t.Errorf("vector index still returns deleted chunk %d", h.ID)
		}
	}
	if n := v.idx.Len(); n != 7 {
		t.Errorf("index holds %d vectors, want 7", n)
	}
	res, err = r.Search(f.ctx, f.ws, carQuery, Options{TopK: 10})
	if err != nil || res.VectorStale {
		t.Fatalf("after refresh: %v, stale %v", err, res.VectorStale)
	}
	if _, ok := passageByRel(res, "garage.md"); ok {
		t.Error("deleted document returned after the refresh")
	}
}

func TestConcurrentSearchDuringRefresh(t *testing.T) {
	f := newFixture(t)
	f.seedCars()
	emb := &conceptEmbedder{}
	f.embed(emb)
	// A tiny crossover puts the index on HNSW, the more delicate case.
	r := f.retriever(emb, Config{Vector: vector.Options{Crossover: 4, Seed: 1}})
	if err := r.Refresh(f.ctx, f.ws); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := r.Search(ctx, f.ws, carQuery, Options{TopK: 10}); err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
			}
		})
	}
	for i := range 20 {
		doc := f.put(fmt.Sprintf("temp%d.md", i), "Automobile servicing log entry", "More vehicle repair notes")
		f.embed(emb)
		if err := r.Refresh(f.ctx, f.ws); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := f.db.DeleteDocument(f.ctx, doc); err != nil {
				t.Fatal(err)
			}
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := r.Refresh(f.ctx, f.ws); err != nil {
		t.Fatal(err)
	}
	res, err := r.Search(f.ctx, f.ws, "automobile servicing log", Options{TopK: 50, Candidates: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Passages {
		var n int
		if _, err := fmt.Sscanf(p.Rel, "temp%d.md", &n); err == nil && n%2 == 0 {
			t.Errorf("deleted %s returned", p.Rel)
		}
	}
	if got := r.state(f.ws, emb.ID()).view().idx.Len(); got != 8+10*2 {
		t.Errorf("index holds %d vectors, want %d", got, 8+10*2)
	}
}

type fakeReranker struct {
	asked [][]string
	fail  error
	short bool
}

func (f *fakeReranker) ID() string { return "fake-rerank" }

// Rerank scores longer passages higher.
func (f *fakeReranker) Rerank(ctx context.Context, query string, docs []string) ([]float32, error) {
	f.asked = append(f.asked, docs)
	if f.fail != nil {
		return nil, f.fail
	}
	out := make([]float32, len(docs))
	for i, d := range docs {
		out[i] = float32(len(d))
	}
	if f.short {
		out = out[1:]
	}
	return out, nil
}

func TestRerank(t *testing.T) {
	mk := func() Result {
		var r Result
		for i, text := range []string{"a", "ccc", "bb", "eeeee", "dddd", "ffffff"} {
			r.Passages = append(r.Passages, Passage{ChunkID: int64(i + 1), Text: text})
		}
		return r
	}
	texts := func(r Result) string {
		var s []string
		for _, p := range r.Passages {
			s = append(s, p.Text)
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct {
		name  string
		k     int
		sent  int
		order string
	}{
		{"first three", 3, 3, "ccc bb a eeeee dddd ffffff"},
		{"default k covers all six", 0, 6, "ffffff eeeee dddd ccc bb a"},
		{"k above the count", 50, 6, "ffffff eeeee dddd ccc bb a"},
		{"one", 1, 1, "a ccc bb eeeee dddd ffffff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := &fakeReranker{}
			res := mk()
			if _, err := (&Retriever{}).Rerank(context.Background(), rr, "q", &res, tc.k); err != nil {
				t.Fatal(err)
			}
			if len(rr.asked) != 1 || len(rr.asked[0]) != tc.sent {
				t.Fatalf("reranker asked %v, want one call with %d passages", rr.asked, tc.sent)
			}
			if got := texts(res); got != tc.order {
				t.Errorf("order %q, want %q", got, tc.order)
			}
			for i, p := range res.Passages {
				if scored := p.Scores.Rerank != 0; scored != (i < tc.sent) {
					t.Errorf("passage %d (%s) rerank score %v", i, p.Text, p.Scores.Rerank)
				}
			}
		})
	}
	for _, rr := range []*fakeReranker{{fail: errors.New("oom")}, {short: true}} {
		res := mk()
		if _, err := (&Retriever{}).Rerank(context.Background(), rr, "q", &res, 4); err == nil {
			t.Errorf("reranker %+v: no error", rr)
		}
		if got := texts(res); got != texts(mk()) {
			t.Errorf("failed rerank changed the result: %q", got)
		}
	}
}

func TestByDocument(t *testing.T) {
	// Document 1 has one short chunk that scores best alone; document 2 is
	// about the question in two chunks.
	got := byDocument([]store.Ranked{
		{ChunkID: 10, Document: 1, Score: 9},
		{ChunkID: 20, Document: 2, Score: 7},
		{ChunkID: 21, Document: 2, Score: 5},
		{ChunkID: 30, Document: 3, Score: 4},
		{ChunkID: 22, Document: 2, Score: 3}, // a third chunk adds nothing
	})
	var ids []int64
	for _, r := range got {
		ids = append(ids, r.ChunkID)
	}
	if want := []int64{20, 10, 21, 30, 22}; !slices.Equal(ids, want) || got[0].Score != 12 {
		t.Errorf("order %v (best %v), want %v with 12", ids, got[0].Score, want)
	}
}
