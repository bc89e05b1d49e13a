package retrieve

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"lore/index/vector"
	"lore/store"
)

// indexKinds runs a test on an exact index and, through a tiny crossover,
// on an HNSW graph.
var indexKinds = []struct {
	name string
	cfg  Config
}{
	{"exact", Config{}},
	{"hnsw", Config{Vector: vector.Options{Crossover: 4, Seed: 7}}},
}

func (f *fixture) record(model string) indexRecord {
	f.t.Helper()
	var rec indexRecord
	ok, err := f.db.Setting(f.ctx, settingKey(f.ws, model), &rec)
	if err != nil || !ok {
		f.t.Fatalf("no index record (%v)", err)
	}
	return rec
}

func (f *fixture) generation() int64 {
	f.t.Helper()
	g, err := f.db.Generation(f.ctx, f.ws)
	if err != nil {
		f.t.Fatal(err)
	}
	return g
}

// sameIndex checks that two retrievers' indexes hold the same vectors: every
// id at the same score for a few probe queries.
func sameIndex(t *testing.T, emb Embedder, a, b *Retriever, ws int64) {
	t.Helper()
	va, vb := a.state(ws, emb.ID()).view(), b.state(ws, emb.ID()).view()
	if va.idx.Len() != vb.idx.Len() {
		t.Fatalf("index sizes %d and %d", va.idx.Len(), vb.idx.Len())
	}
	probes, _ := emb.Embed(t.Context(), []string{"car repair", "ledger freight", "bread flour", "galaxies"})
	for _, q := range probes {
		ra, rb := va.idx.Search(q, 1000), vb.idx.Search(q, 1000)
		score := map[int64]float32{}
		for _, h := range rb {
			score[h.ID] = h.Score
		}
		if len(ra) != len(rb) {
			t.Fatalf("probe returned %d and %d results", len(ra), len(rb))
		}
		for _, h := range ra {
			s, ok := score[h.ID]
			if !ok || math.Abs(float64(s-h.Score)) > 1e-5 {
				t.Fatalf("id %d scores %v and %v (present %v)", h.ID, h.Score, s, ok)
			}
		}
	}
}

func TestPersistedIndexReloaded(t *testing.T) {
	for _, kind := range indexKinds {
		t.Run(kind.name, func(t *testing.T) {
			f := newFixture(t)
			f.seedCars()
			emb := &conceptEmbedder{}
			f.embed(emb)
			r1 := f.retriever(emb, kind.cfg)
			if err := r1.Refresh(f.ctx, f.ws); err != nil {
				t.Fatal(err)
			}
			if st := r1.Stats(); st.IndexBuilds != 1 || st.IndexLoads != 0 {
				t.Fatalf("first refresh: %+v, want one build", st)
			}
			if _, ok := r1.state(f.ws, emb.ID()).view().idx.Inner().(*vector.HNSW); ok != (kind.name == "hnsw") {
				t.Fatalf("index kind: HNSW %v", ok)
			}
			rec := f.record(emb.ID())
			if rec.Generation != f.generation() || rec.Count != 8 || rec.Dim != 64 || len(rec.Checksum) != 64 {
				t.Fatalf("record %+v", rec)
			}
			if _, err := os.Stat(r1.GraphPath(f.ws, emb.ID())); err != nil {
				t.Fatal(err)
			}
			want, err := r1.Search(f.ctx, f.ws, carQuery, Options{})
			if err != nil {
				t.Fatal(err)
			}

			// A new process: explicit refresh loads, no build.
			r2 := f.retriever(emb, kind.cfg)
			if err := r2.Refresh(f.ctx, f.ws); err != nil {
				t.Fatal(err)
			}
			if st := r2.Stats(); st.IndexBuilds != 0 || st.IndexLoads != 1 {
				t.Fatalf("second retriever: %+v, want one load and no build", st)
			}
			sameIndex(t, emb, r1, r2, f.ws)

			// Another, searching first: the search loads it lazily.
			r3 := f.retriever(emb, kind.cfg)
			got, err := r3.Search(f.ctx, f.ws, carQuery, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if st := r3.Stats(); st.IndexBuilds != 0 || st.IndexLoads != 1 {
				t.Fatalf("lazy load: %+v", st)
			}
			if got.Mode != ModeHybrid || !slices.Equal(rels(got), rels(want)) {
				t.Errorf("after reload: %s %v, want hybrid %v", got.Mode, rels(got), rels(want))
			}
		})
	}
}

func TestDamagedIndexRebuilt(t *testing.T) {
	flip := func(path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		b[len(b)/2] ^= 0x10
		return os.WriteFile(path, b, 0o644)
	}
	truncate := func(path string) error {
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		return os.Truncate(path, st.Size()/2)
	}
	ids := func(graph string) string { return strings.TrimSuffix(graph, ".vec") + ".ids" }
	for _, tc := range []struct {
		name   string
		damage func(f *fixture, graph string) error
		reason string
	}{
		{"graph deleted", func(f *fixture, g string) error { return os.Remove(g) }, "no such file"},
		{"graph truncated", func(f *fixture, g string) error { return truncate(g) }, "checksum"},
		{"graph bit flipped", func(f *fixture, g string) error { return flip(g) }, "checksum"},
		{"graph emptied", func(f *fixture, g string) error { return os.WriteFile(g, nil, 0o644) }, "checksum"},
		{"id file deleted", func(f *fixture, g string) error { return os.Remove(ids(g)) }, "id file"},
		{"id file bit flipped", func(f *fixture, g string) error { return flip(ids(g)) }, "id file"},
		{"record checksum wrong", func(f *fixture, g string) error {
			rec := f.record("concept-64")
			rec.Checksum = strings.Repeat("0", 64)
			return f.db.PutSetting(f.ctx, settingKey(f.ws, "concept-64"), rec)
		}, "checksum"},
		{"record count wrong", func(f *fixture, g string) error {
			rec := f.record("concept-64")
			rec.Count++
			return f.db.PutSetting(f.ctx, settingKey(f.ws, "concept-64"), rec)
		}, "record says"},
		{"record names another file", func(f *fixture, g string) error {
			rec := f.record("concept-64")
			rec.File = "../../etc/passwd"
			return f.db.PutSetting(f.ctx, settingKey(f.ws, "concept-64"), rec)
		}, "not this index's"},
		{"record of another version", func(f *fixture, g string) error {
			return f.db.PutSetting(f.ctx, settingKey(f.ws, "concept-64"), map[string]int{"version": 99})
		}, "record version"},
	} {
		for _, kind := range indexKinds {
			t.Run(tc.name+"/"+kind.name, func(t *testing.T) {
				f := newFixture(t)
				f.seedCars()
				emb := &conceptEmbedder{}
				f.embed(emb)
				r1 := f.retriever(emb, kind.cfg)
				if err := r1.Refresh(f.ctx, f.ws); err != nil {
					t.Fatal(err)
				}
				if err := tc.damage(f, r1.GraphPath(f.ws, emb.ID())); err != nil {
					t.Fatal(err)
				}
				r2 := f.retriever(emb, kind.cfg)
				res, err := r2.Search(f.ctx, f.ws, carQuery, Options{Candidates: 3})
				if err != nil {
					t.Fatal(err)
				}
				st := r2.Stats()
				if st.IndexBuilds != 1 || st.IndexLoads != 0 || !strings.Contains(st.LastRebuildReason, tc.reason) {
					t.Fatalf("stats %+v, want one build because of %q", st, tc.reason)
				}
				if p, ok := passageByRel(res, "garage.md"); res.Mode != ModeHybrid || !ok || p.Scores.VectorRank == 0 {
					t.Errorf("rebuilt index: mode %s, %v", res.Mode, rels(res))
				}
				sameIndex(t, emb, r1, r2, f.ws)
				// The rebuild was written back (once the background refresh
				// is done, which Refresh waits for): the next process loads it.
				if err := r2.Refresh(f.ctx, f.ws); err != nil {
					t.Fatal(err)
				}
				r3 := f.retriever(emb, kind.cfg)
				if err := r3.Refresh(f.ctx, f.ws); err != nil {
					t.Fatal(err)
				}
				if st := r3.Stats(); st.IndexLoads != 1 || st.IndexBuilds != 0 {
					t.Errorf("after the rebuild: %+v, want a load", st)
				}
			})
		}
	}
}

func TestIncrementalRefresh(t *testing.T) {
	for _, kind := range indexKinds {
		t.Run(kind.name, func(t *testing.T) {
			f := newFixture(t)
			f.seedCars()
			emb := &conceptEmbedder{}
			f.embed(emb)
			r1 := f.retriever(emb, kind.cfg)
			if err := r1.Refresh(f.ctx, f.ws); err != nil {
				t.Fatal(err)
			}
			rec1 := f.record(emb.ID())

			// Re-index the newest document with other text: SQLite hands its
			// chunk id out again, so only the fingerprint shows the change.
			garden, err := f.db.DocumentByPath(f.ctx, f.ws, "/docs/garden.md")
			if err != nil {
				t.Fatal(err)
			}
			oldIDs := f.chunkIDs(garden.ID)
			f.put("garden.md", "Automobile servicing handbook for every vehicle.")
			if newIDs := f.chunkIDs(garden.ID); !slices.Equal(oldIDs, newIDs) {
				t.Logf("chunk ids not reused (%v → %v); the reuse case is not exercised", oldIDs, newIDs)
			}
			f.put("dealer.md", "The dealer sells vehicles and offers maintenance plans.", "Opening hours and directions.")
			bread, err := f.db.DocumentByPath(f.ctx, f.ws, "/docs/bread.md")
			if err != nil {
				t.Fatal(err)
			}
			if err := f.db.DeleteDocument(f.ctx, bread.ID); err != nil {
				t.Fatal(err)
			}
			f.embed(emb)

			// In this process: updated in place, not rebuilt.
			if err := r1.Refresh(f.ctx, f.ws); err != nil {
				t.Fatal(err)
			}
			if st := r1.Stats(); st.IndexBuilds != 1 || st.IndexUpdates != 1 {
				t.Fatalf("stats %+v, want the first build and one update", st)
			}
			rec2 := f.record(emb.ID())
			if rec2.Generation != f.generation() || rec2.Generation == rec1.Generation || rec2.Count != 9 || rec2.Checksum == rec1.Checksum {
				t.Errorf("record after update %+v (before %+v)", rec2, rec1)
			}
			fresh := NewWithConfig(f.db, "", emb, kind.cfg) // built from scratch, in memory
			defer fresh.Close()
			if err := fresh.Refresh(f.ctx, f.ws); err != nil {
				t.Fatal(err)
			}
			sameIndex(t, emb, r1, fresh, f.ws)

			// In a new process from the file of the older generation: loaded
			// and brought up to date.
			r2 := f.retriever(emb, kind.cfg)
			res, err := r2.Search(f.ctx, f.ws, "car repair", Options{TopK: 3, Candidates: 3})
			if err != nil {
				t.Fatal(err)
			}
			if p, ok := passageByRel(res, "garden.md"); !ok || p.Scores.VectorRank == 0 || !strings.Contains(p.Text, "handbook") {
				t.Errorf("re-indexed garden.md not found by its new vector: %v", rels(res))
			}
			if _, ok := passageByRel(res, "bread.md"); ok {
				t.Error("deleted bread.md returned")
			}
			sameIndex(t, emb, r2, fresh, f.ws)
		})
	}
}

func TestIncrementalFromOlderFile(t *testing.T) {
	f := newFixture(t)
	f.seedCars()
	emb := &conceptEmbedder{}
	f.embed(emb)
	r1 := f.retriever(emb, Config{})
	if err := r1.Refresh(f.ctx, f.ws); err != nil {
		t.Fatal(err)
	}
	r1.Close()
	// Indexing continues without this retriever (another process, say).
	f.put("dealer.md", "The dealer sells vehicles and offers maintenance plans.")
	f.embed(emb)
	r2 := f.retriever(emb, Config{})
	if err := r2.Refresh(f.ctx, f.ws); err != nil {
		t.Fatal(err)
	}
	if st := r2.Stats(); st.IndexLoads != 1 || st.IndexBuilds != 0 || st.IndexUpdates != 1 {
		t.Fatalf("stats %+v, want a load and an update, no build", st)
	}
	if rec := f.record(emb.ID()); rec.Generation != f.generation() || rec.Count != 9 {
		t.Errorf("record %+v", rec)
	}
	if n := r2.state(f.ws, emb.ID()).view().idx.Len(); n != 9 {
		t.Errorf("index holds %d vectors, want 9", n)
	}
}

func TestStaleIndexRefreshedInBackground(t *testing.T) {
	f := newFixture(t)
	f.seedCars()
	emb := &conceptEmbedder{}
	f.embed(emb)
	r := f.retriever(emb, Config{})
	if err := r.Refresh(f.ctx, f.ws); err != nil {
		t.Fatal(err)
	}
	f.put("dealer.md", "Vehicles sold here with repair plans.")
	f.embed(emb)
	res, err := r.Search(f.ctx, f.ws, carQuery, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.VectorStale || res.Mode != ModeHybrid {
		t.Fatalf("first search after a change: stale %v, mode %s", res.VectorStale, res.Mode)
	}
	// Refresh waits for the background refresh the search started.
	if err := r.Refresh(f.ctx, f.ws); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.IndexUpdates != 1 || st.IndexBuilds != 1 {
		t.Errorf("stats %+v, want one background update", st)
	}
	res, err = r.Search(f.ctx, f.ws, carQuery, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.CacheHit || res.VectorStale {
		t.Errorf("stale result was cached (hit %v) or index still stale (%v)", res.CacheHit, res.VectorStale)
	}
	if p, ok := passageByRel(res, "dealer.md"); !ok || p.Scores.VectorRank == 0 {
		t.Errorf("dealer.md not found by vectors after the refresh: %v", rels(res))
	}
}

func TestInMemoryOnly(t *testing.T) {
	f := newFixture(t)
	f.seedCars()
	emb := &conceptEmbedder{}
	f.embed(emb)
	r := NewWithConfig(f.db, "", emb, Config{})
	defer r.Close()
	if err := r.Refresh(f.ctx, f.ws); err != nil {
		t.Fatal(err)
	}
	if r.GraphPath(f.ws, emb.ID()) != "" {
		t.Error("graph path without a folder")
	}
	if ok, _ := f.db.Setting(f.ctx, settingKey(f.ws, emb.ID()), &indexRecord{}); ok {
		t.Error("record written without a folder")
	}
	if _, err := os.Stat(f.dir); !os.IsNotExist(err) {
		t.Errorf("vector folder created: %v", err)
	}
}

func TestFPFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.ids")
	want := map[int64]uint64{3: 30, 1: 10, 1 << 40: math.MaxUint64}
	sum, err := vector.SaveFile(path, fpFile(want))
	if err != nil {
		t.Fatal(err)
	}
	got, err := loadFPs(path, sum)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("id %d: %d, want %d", k, got[k], v)
		}
	}
	if _, err := loadFPs(path, strings.Repeat("0", 64)); err == nil {
		t.Error("wrong checksum accepted")
	}
}

func TestFileBase(t *testing.T) {
	for _, tc := range []struct {
		ws    int64
		a, b  string
		equal bool
	}{
		{1, "nomic-embed-text:v1.5", "nomic-embed-text:v1.5", true},
		{1, "a/b", "a_b", false}, // same cleaned name, different models
		{1, "../../x", "x", false},
	} {
		fa, fb := fileBase(tc.ws, tc.a), fileBase(tc.ws, tc.b)
		if (fa == fb) != tc.equal {
			t.Errorf("fileBase(%q)=%q, fileBase(%q)=%q", tc.a, fa, tc.b, fb)
		}
		if strings.ContainsAny(fa, `/\:`) || strings.Contains(fa, "..") {
			t.Errorf("fileBase(%q) = %q is not a plain name", tc.a, fa)
		}
	}
}

func TestBadVectorsDegrade(t *testing.T) {
	f := newFixture(t)
	f.seedCars()
	emb := &conceptEmbedder{}
	f.embed(emb)
	// A vector of another length under the same model id: the index cannot
	// be built, searches fall back to BM25 and do not retry on every call.
	odd := f.put("odd.md", "Odd passage about automobile parts.")
	if err := f.db.PutEmbeddings(f.ctx, emb.ID(), []store.Embedding{{ChunkID: f.chunkIDs(odd)[0], Vec: []float32{1, 0, 0}}}); err != nil {
		t.Fatal(err)
	}
	r := f.retriever(emb, Config{})
	for i := range 3 {
		res, err := r.Search(f.ctx, f.ws, carQuery, Options{NoCache: true})
		if err != nil {
			t.Fatal(err)
		}
		if res.Mode != ModeBM25 || !strings.Contains(res.Degraded, "dimensional") {
			t.Fatalf("search %d: mode %s (%q), want bm25 explaining the bad vector", i, res.Mode, res.Degraded)
		}
	}
	if st := r.Stats(); st.IndexFailures != 1 {
		t.Errorf("%d failed refreshes for three searches, want 1", st.IndexFailures)
	}
	if err := r.Refresh(f.ctx, f.ws); err == nil || r.Stats().IndexFailures != 2 {
		t.Errorf("explicit refresh: %v, failures %d", err, r.Stats().IndexFailures)
	}
}

func TestPreload(t *testing.T) {
	f := newFixture(t)
	f.seedCars()
	emb := &conceptEmbedder{}
	f.embed(emb)
	r := f.retriever(emb, Config{})
	r.Preload(f.ws)
	if err := r.Refresh(f.ctx, f.ws); err != nil { // waits for the preload
		t.Fatal(err)
	}
	if st := r.Stats(); st.IndexBuilds != 1 {
		t.Errorf("stats %+v, want exactly one build", st)
	}
	res, err := r.Search(f.ctx, f.ws, carQuery, Options{})
	if err != nil || res.Mode != ModeHybrid {
		t.Errorf("after preload: %v %s", err, res.Mode)
	}
	New(f.db, "", nil).Preload(f.ws) // no embedder: nothing to do, no panic
}

func TestLacks(t *testing.T) {
	fps := map[int64]uint64{1: 10, 2: 20}
	pend := []pendingVec{{id: 3}}
	for _, tc := range []struct {
		ids  []int64
		want bool
	}{
		{nil, false},
		{[]int64{1, 2}, false},
		{[]int64{1, 2, 3}, false}, // 3 is pending
		{[]int64{2, 4}, true},     // 4 is stored, neither indexed nor pending
	} {
		if got := lacks(tc.ids, fps, pend); got != tc.want {
			t.Errorf("lacks(%v) = %v, want %v", tc.ids, got, tc.want)
		}
	}
}
