package vector

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// TestDot checks Dot and the portable kernel against a float64 sum, over
// lengths that exercise every unrolled step and tail, at unaligned offsets.
func TestDot(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 3, 7, 8, 9, 15, 16, 31, 32, 33, 63, 64, 65, 100, 384, 385, 768, 1000} {
		for _, off := range []int{0, 1, 3} {
			a, b := make([]float32, n+off)[off:], make([]float32, n+off)[off:]
			var want float64
			for i := range a {
				a[i], b[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
				want += float64(a[i]) * float64(b[i])
			}
			tol := 1e-5 * max(1, math.Sqrt(float64(n)))
			for name, f := range map[string]func(a, b []float32) float32{"Dot": Dot, "dotGo": dotGo} {
				if got := f(a, b); math.Abs(float64(got)-want) > tol {
					t.Errorf("%s(n=%d, offset %d) = %v, want %v", name, n, off, got, want)
				}
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Dot of different lengths did not panic")
		}
	}()
	Dot(make([]float32, 3), make([]float32, 4))
}

func TestNormalize(t *testing.T) {
	v := []float32{3, 4}
	Normalize(v)
	if v[0] != 0.6 || v[1] != 0.8 {
		t.Errorf("Normalize(3,4) = %v", v)
	}
	z := []float32{0, 0}
	Normalize(z)
	if z[0] != 0 || z[1] != 0 {
		t.Errorf("Normalize(0,0) = %v", z)
	}
}

// testData returns n clustered unit vectors and nq queries from the same
// blobs, with ids 0..n-1.
func testData(n, dim, nq int, seed uint64) ([]int64, [][]float32, [][]float32) {
	c, q := BenchData(n, dim, nq, seed)
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)
	}
	return ids, c, q
}

func newIndexes(t *testing.T, dim int) map[string]Index {
	t.Helper()
	e, err := NewExact(dim)
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHNSW(dim, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuto(dim, Options{Crossover: 100})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]Index{"exact": e, "hnsw": h, "auto": a}
}

func fill(t *testing.T, x Index, ids []int64, vecs [][]float32) {
	t.Helper()
	for i, v := range vecs {
		if err := x.Add(ids[i], v); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAddErrors(t *testing.T) {
	for name, x := range newIndexes(t, 4) {
		for _, tc := range []struct {
			name string
			vec  []float32
		}{
			{"short", []float32{1, 0, 0}},
			{"long", []float32{1, 0, 0, 0, 0}},
			{"nan", []float32{float32(math.NaN()), 0, 0, 0}},
			{"inf", []float32{float32(math.Inf(1)), 0, 0, 0}},
		} {
			if err := x.Add(1, tc.vec); err == nil {
				t.Errorf("%s: Add(%s) succeeded", name, tc.name)
			}
		}
		if x.Len() != 0 {
			t.Errorf("%s: Len = %d after failed adds", name, x.Len())
		}
		if got := x.Search([]float32{1, 0}, 3); got != nil {
			t.Errorf("%s: Search with a short query = %v", name, got)
		}
	}
	if _, err := NewExact(0); err == nil {
		t.Error("NewExact(0) succeeded")
	}
	if _, err := NewHNSW(8, Options{M: 1}); err == nil {
		t.Error("NewHNSW with M=1 succeeded")
	}
}

// TestBasic checks the Index contract on a corpus small enough that HNSW
// must be exact too.
func TestBasic(t *testing.T) {
	const dim = 16
	ids, vecs, queries := testData(300, dim, 20, 7)
	for name, x := range newIndexes(t, dim) {
		t.Run(name, func(t *testing.T) {
			if got := x.Search(queries[0], 5); len(got) != 0 {
				t.Fatalf("empty index returned %v", got)
			}
			fill(t, x, ids, vecs)
			if x.Len() != len(ids) {
				t.Fatalf("Len = %d, want %d", x.Len(), len(ids))
			}
			// Each stored vector finds itself first.
			for i := 0; i < len(vecs); i += 37 {
				got := x.Search(vecs[i], 3)
				if len(got) != 3 || got[0].ID != ids[i] || math.Abs(float64(got[0].Score)-1) > 1e-5 {
					t.Fatalf("Search(vec %d) = %v", i, got)
				}
				if !slices.IsSortedFunc(got, func(a, b Result) int { return -cmpF(a.Score, b.Score) }) {
					t.Fatalf("results not best first: %v", got)
				}
			}
			// k larger than the corpus returns everything once.
			if got := x.Search(queries[0], 1000); len(got) != len(ids) {
				t.Fatalf("Search(k=1000) returned %d", len(got))
			}
			if got := x.Search(queries[0], 0); len(got) != 0 {
				t.Fatalf("Search(k=0) returned %v", got)
			}

			// Update: id 5 now holds vector 6's direction negated.
			upd := slices.Clone(vecs[6])
			for i := range upd {
				upd[i] = -upd[i]
			}
			if err := x.Add(5, upd); err != nil {
				t.Fatal(err)
			}
			if x.Len() != len(ids) {
				t.Fatalf("Len after update = %d", x.Len())
			}
			if got := x.Search(upd, 1); len(got) != 1 || got[0].ID != 5 {
				t.Fatalf("search for updated vector = %v", got)
			}
			for _, r := range x.Search(vecs[5], 20) {
				if r.ID == 5 {
					t.Fatalf("old vector of id 5 still found: %v", r)
				}
			}

			x.Delete(7)
			x.Delete(7)
			x.Delete(1 << 40) // absent
			if x.Len() != len(ids)-1 {
				t.Fatalf("Len after delete = %d", x.Len())
			}
			if got := x.Search(vecs[7], 5); len(got) != 5 || slices.ContainsFunc(got, func(r Result) bool { return r.ID == 7 }) {
				t.Fatalf("search after delete = %v", got)
			}
			if err := x.Add(7, vecs[7]); err != nil {
				t.Fatal(err)
			}
			if got := x.Search(vecs[7], 1); len(got) != 1 || got[0].ID != 7 {
				t.Fatalf("search after re-add = %v", got)
			}
		})
	}
}

func cmpF(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func meanRecall(t *testing.T, x, truth Index, queries [][]float32, k int) float64 {
	t.Helper()
	var sum float64
	for _, q := range queries {
		sum += Recall(x.Search(q, k), truth.Search(q, k))
	}
	return sum / float64(len(queries))
}

// TestRecall is the acceptance test for the defaults: 20k clustered 384-d
// vectors, recall@10 against exact search. About 15 s on 2 cores.
func TestRecall(t *testing.T) {
	ids, vecs, queries := testData(20000, 384, 200, 3)
	e, _ := NewExact(384)
	fill(t, e, ids, vecs)
	h, err := NewHNSW(384, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.AddBatch(context.Background(), ids, vecs); err != nil {
		t.Fatal(err)
	}
	if h.Len() != len(ids) {
		t.Fatalf("Len = %d", h.Len())
	}
	checkGraph(t, h)
	r := meanRecall(t, h, e, queries, 10)
	t.Logf("recall@10 = %.4f", r)
	if r < 0.95 {
		t.Errorf("recall@10 = %.4f, want >= 0.95", r)
	}
}

// checkGraph verifies the graph invariants (links in range, no self-links,
// levels, entry point) by saving h and loading it back, as Load checks them
// all.
func checkGraph(t *testing.T, h *HNSW) {
	t.Helper()
	var b bytes.Buffer
	if err := h.Save(&b); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(&b, h.Dim()); err != nil {
		t.Fatalf("graph fails validation: %v", err)
	}
}

// TestParallelBuild builds with more goroutines than cores, so that inserts
// interleave, and checks the graph and its recall. The small-M case makes
// many multi-layer nodes, which once let a node link to itself.
func TestParallelBuild(t *testing.T) {
	const dim = 8
	ids, vecs, queries := testData(20000, dim, 100, 13)
	e, _ := NewExact(dim)
	fill(t, e, ids, vecs)
	for _, tc := range []struct {
		m, efc, workers int
		recall          float64
	}{
		{16, 100, 1, 0.97},
		{16, 100, 8, 0.97},
		{2, 32, 8, 0.5},
		{3, 32, 8, 0.5},
	} {
		h, _ := NewHNSW(dim, Options{M: tc.m, EfConstruction: tc.efc, Workers: tc.workers})
		if err := h.AddBatch(context.Background(), ids, vecs); err != nil {
			t.Fatal(err)
		}
		checkGraph(t, h)
		if r := meanRecall(t, h, e, queries, 10); r < tc.recall {
			t.Errorf("%+v: recall@10 = %.3f", tc, r)
		}
	}
}

// TestDeletes removes the nearest neighbours of every query, and most of
// the corpus, and checks that searches still return k live results.
func TestDeletes(t *testing.T) {
	const dim, k = 32, 10
	ids, vecs, queries := testData(3000, dim, 50, 4)
	h, _ := NewHNSW(dim, Options{Seed: 2})
	e, _ := NewExact(dim)
	fill(t, h, ids, vecs)
	fill(t, e, ids, vecs)

	gone := map[int64]bool{}
	for _, q := range queries {
		for _, r := range e.Search(q, k) {
			gone[r.ID] = true
		}
	}
	for id := range int64(2500) {
		if id%3 == 0 {
			gone[id] = true
		}
	}
	for id := range gone {
		h.Delete(id)
		e.Delete(id)
	}
	if h.Len() != e.Len() || h.Deleted() != len(gone) {
		t.Fatalf("Len %d (want %d), Deleted %d (want %d)", h.Len(), e.Len(), h.Deleted(), len(gone))
	}
	check := func(stage string) {
		for _, q := range queries {
			got := h.Search(q, k)
			if len(got) != k {
				t.Fatalf("%s: got %d results, want %d", stage, len(got), k)
			}
			for _, r := range got {
				if gone[r.ID] {
					t.Fatalf("%s: deleted id %d returned", stage, r.ID)
				}
			}
		}
		if r := meanRecall(t, h, e, queries, k); r < 0.95 {
			t.Errorf("%s: recall@%d = %.3f", stage, k, r)
		}
	}
	check("tombstones")
	h.opt.RebuildAt = 10
	if did, err := h.MaybeRebuild(context.Background()); did || err != nil {
		t.Fatalf("MaybeRebuild below the threshold = %v, %v", did, err)
	}
	h.opt.RebuildAt = 0.25
	if did, err := h.MaybeRebuild(context.Background()); !did || err != nil {
		t.Fatalf("MaybeRebuild above the threshold = %v, %v", did, err)
	}
	if h.Deleted() != 0 || h.Len() != e.Len() {
		t.Fatalf("after Rebuild: Deleted %d, Len %d (want %d)", h.Deleted(), h.Len(), e.Len())
	}
	check("rebuilt")

	// Delete all but three: searches return exactly those.
	left := map[int64]bool{}
	for id := range int64(len(ids)) {
		if !gone[id] && len(left) < 3 {
			left[id] = true
		} else {
			h.Delete(id)
		}
	}
	got := h.Search(queries[0], k)
	if len(got) != 3 {
		t.Fatalf("got %v, want the 3 live ids", got)
	}
	for _, r := range got {
		if !left[r.ID] {
			t.Fatalf("got dead id %d", r.ID)
		}
	}
}

// TestRebuildDuringUpdates runs Rebuild while another goroutine adds,
// updates and deletes, then checks that the index holds exactly the final
// set of ids, each with its final vector.
func TestRebuildDuringUpdates(t *testing.T) {
	const dim = 16
	ids, vecs, _ := testData(4000, dim, 0, 5)
	h, _ := NewHNSW(dim, Options{Seed: 3, Workers: 2})
	if err := h.AddBatch(context.Background(), ids[:3000], vecs[:3000]); err != nil {
		t.Fatal(err)
	}
	for id := range int64(1000) {
		h.Delete(id)
	}
	want := map[int64]int{} // id -> index of its vector
	for i := 1000; i < 3000; i++ {
		want[int64(i)] = i
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 3000; i < 4000; i++ {
			switch i % 3 {
			case 0: // new id
				h.Add(int64(i), vecs[i])
				want[int64(i)] = i
			case 1: // update an old id with vector i
				id := int64(1000 + i%2000)
				h.Add(id, vecs[i])
				want[id] = i
			case 2: // delete
				id := int64(1000 + (i*7)%2000)
				h.Delete(id)
				delete(want, id)
			}
		}
	}()
	if err := h.Rebuild(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-done
	checkGraph(t, h)

	if h.Len() != len(want) {
		t.Fatalf("Len = %d, want %d", h.Len(), len(want))
	}
	h.mu.RLock()
	for id, i := range want {
		n, ok := h.g.byID[id]
		if !ok || !slices.Equal(h.g.vec(n), vecs[i]) {
			t.Fatalf("id %d missing or holding the wrong vector", id)
		}
	}
	h.mu.RUnlock()
	// The graph routes to them: an approximate index may miss a rare node
	// (one whose back-links were all pruned), so allow 1%.
	miss := 0
	for id, i := range want {
		if got := h.Search(vecs[i], 1); len(got) != 1 || got[0].ID != id {
			miss++
		}
	}
	if miss > len(want)/100 {
		t.Errorf("%d of %d vectors not found by searching for themselves", miss, len(want))
	}
}

func TestRebuildCancel(t *testing.T) {
	ids, vecs, queries := testData(3000, 16, 5, 6)
	h, _ := NewHNSW(16, Options{})
	fill(t, h, ids, vecs)
	h.Delete(1)
	before := h.Search(queries[0], 10)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.Rebuild(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Rebuild with a cancelled context: %v", err)
	}
	if h.Deleted() != 1 || !slices.Equal(h.Search(queries[0], 10), before) {
		t.Fatal("cancelled Rebuild changed the index")
	}
	if err := h.AddBatch(ctx, []int64{9999}, vecs[:1]); !errors.Is(err, context.Canceled) {
		t.Fatalf("AddBatch with a cancelled context: %v", err)
	}
}

// TestConcurrent searches while adding and deleting; run it with -race.
func TestConcurrent(t *testing.T) {
	const dim = 16
	ids, vecs, queries := testData(1200, dim, 20, 8)
	for name, x := range newIndexes(t, dim) {
		t.Run(name, func(t *testing.T) {
			fill(t, x, ids[:200], vecs[:200])
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for w := range 2 {
				wg.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						for _, r := range x.Search(queries[(i+w)%len(queries)], 5) {
							if r.ID < 0 || r.ID >= int64(len(ids)) {
								t.Errorf("bad id %d", r.ID)
							}
						}
					}
				})
			}
			wg.Go(func() {
				if h, ok := x.(*HNSW); ok {
					if err := h.Rebuild(context.Background()); err != nil {
						t.Error(err)
					}
				}
			})
			for i := 200; i < len(ids); i++ {
				if err := x.Add(ids[i], vecs[i]); err != nil {
					t.Error(err)
				}
				if i%4 == 0 {
					x.Delete(ids[i-100])
				}
			}
			close(stop)
			wg.Wait()
			if want := len(ids) - (len(ids)-200)/4; x.Len() != want {
				t.Errorf("Len = %d, want %d", x.Len(), want)
			}
		})
	}
}

func TestAutoSwitches(t *testing.T) {
	const dim = 16
	ids, vecs, queries := testData(500, dim, 20, 9)
	a, err := NewAuto(dim, Options{Crossover: 200})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := NewExact(dim)
	for i := range ids {
		if err := a.Add(ids[i], vecs[i]); err != nil {
			t.Fatal(err)
		}
		e.Add(ids[i], vecs[i])
		_, isH := a.Inner().(*HNSW)
		if want := i+1 > 200; isH != want {
			t.Fatalf("after %d adds: HNSW = %v", i+1, isH)
		}
	}
	if a.Len() != len(ids) {
		t.Fatalf("Len = %d", a.Len())
	}
	if r := meanRecall(t, a, e, queries, 10); r < 0.99 {
		t.Errorf("recall after switching = %.3f", r)
	}
}

func TestClustered(t *testing.T) {
	a, b := Clustered(500, 16, 3), Clustered(500, 16, 3)
	if len(a) != 500 || !slices.Equal(a[499], b[499]) {
		t.Fatal("Clustered is not reproducible")
	}
	for _, v := range a {
		if n := Dot(v, v); math.Abs(float64(n)-1) > 1e-5 {
			t.Fatalf("vector of squared norm %v", n)
		}
	}
}
