package vector

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// HNSW is an approximate nearest-neighbour index over a hierarchical
// navigable small-world graph. Deleted vectors become tombstones: they still
// route searches but are never returned. Rebuild drops them.
type HNSW struct {
	dim     int // fixed; h.g is swapped by Rebuild
	mu      sync.RWMutex
	g       *graph
	opt     Options
	pool    sync.Pool          // *searcher
	touched map[int64]struct{} // ids changed while Rebuild runs; nil otherwise
}

var _ Index = (*HNSW)(nil)

// NewHNSW returns an empty index for vectors of length dim.
func NewHNSW(dim int, opt Options) (*HNSW, error) {
	if err := checkDim(dim); err != nil {
		return nil, err
	}
	opt = opt.withDefaults()
	if err := opt.validate(); err != nil {
		return nil, err
	}
	return newHNSW(newGraph(dim, opt), opt), nil
}

func newHNSW(g *graph, opt Options) *HNSW {
	h := &HNSW{dim: g.dim, g: g, opt: opt}
	h.pool.New = func() any { return new(searcher) }
	return h
}

// Dim reports the vector length.
func (h *HNSW) Dim() int { return h.dim }

// Options reports the parameters in use.
func (h *HNSW) Options() Options {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.opt
}

// SetEfSearch changes the search beam width; larger is slower and more
// accurate.
func (h *HNSW) SetEfSearch(ef int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.opt.EfSearch = max(1, min(ef, maxEf))
}

// Add stores vec under id. Re-adding an id replaces its vector (the old
// node becomes a tombstone).
func (h *HNSW) Add(id int64, vec []float32) error {
	if err := checkVec(vec, h.dim); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.note(id)
	s := h.pool.Get().(*searcher)
	h.g.add(id, vec, s)
	h.pool.Put(s)
	return nil
}

// AddBatch adds many vectors using Options.Workers goroutines. It takes the
// write lock for one chunk of nodes at a time, so searches proceed between
// chunks, and stops between chunks when ctx is done (the chunks already
// added stay).
func (h *HNSW) AddBatch(ctx context.Context, ids []int64, vecs [][]float32) error {
	if len(ids) != len(vecs) {
		return fmt.Errorf("vector: %d ids for %d vectors", len(ids), len(vecs))
	}
	for i, v := range vecs {
		if err := checkVec(v, h.dim); err != nil {
			return fmt.Errorf("vector %d (id %d): %w", i, ids[i], err)
		}
	}
	for start := 0; start < len(ids); start += batchChunk {
		end := min(start+batchChunk, len(ids))
		if err := h.addChunk(ctx, ids[start:end], vecs[start:end]); err != nil {
			return err
		}
	}
	return nil
}

func (h *HNSW) addChunk(ctx context.Context, ids []int64, vecs [][]float32) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		h.note(id)
	}
	return h.g.addBatch(ctx, ids, vecs, h.opt.Workers, &h.pool)
}

// Delete tombstones id.
func (h *HNSW) Delete(id int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.note(id)
	h.g.delete(id)
}

// note records a change for a running Rebuild to replay. h.mu is held.
func (h *HNSW) note(id int64) {
	if h.touched != nil {
		h.touched[id] = struct{}{}
	}
}

// Len reports the number of live vectors.
func (h *HNSW) Len() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.g.byID)
}

// Deleted reports the number of tombstones, a cost paid by every search
// until Rebuild. Callers rebuild when it passes a fraction of Len, say 0.2.
func (h *HNSW) Deleted() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.g.ndead
}

// Search returns up to k live vectors nearest to query, best first. A query
// of the wrong length returns nil.
func (h *HNSW) Search(query []float32, k int) []Result {
	if len(query) != h.dim || k <= 0 {
		return nil
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	s := h.pool.Get().(*searcher)
	defer h.pool.Put(s)
	hits := h.g.search(query, k, h.opt.EfSearch, s)
	out := make([]Result, len(hits))
	for i, it := range hits {
		out[i] = Result{ID: h.g.ids[it.n], Score: -it.d}
	}
	return out
}

// MaybeRebuild runs Rebuild if tombstones outnumber Options.RebuildAt
// times the live vectors, and reports whether it did. Tombstones cost every
// search some time, and each update leaves one.
func (h *HNSW) MaybeRebuild(ctx context.Context) (bool, error) {
	h.mu.RLock()
	stale := float64(h.g.ndead) > h.opt.RebuildAt*float64(len(h.g.byID))
	h.mu.RUnlock()
	if !stale {
		return false, nil
	}
	return true, h.Rebuild(ctx)
}

// ErrRebuilding is returned by Rebuild while another Rebuild runs.
var ErrRebuilding = errors.New("vector: rebuild already running")

// Rebuild builds a fresh graph from the live vectors, dropping tombstones,
// and swaps it in. Searches and updates continue meanwhile (updates are
// replayed onto the new graph before the swap). On error, including ctx
// being done, the index is left as it was.
func (h *HNSW) Rebuild(ctx context.Context) error {
	h.mu.Lock()
	if h.touched != nil {
		h.mu.Unlock()
		return ErrRebuilding
	}
	old, opt := h.g, h.opt
	ids := make([]int64, 0, len(old.byID))
	vecs := make([][]float32, 0, len(old.byID))
	for n, id := range old.ids {
		if !old.dead[n] {
			ids = append(ids, id)
			// Nodes are never changed in place, so this view of the
			// arena stays valid even as Add appends behind it.
			vecs = append(vecs, old.vec(uint32(n)))
		}
	}
	h.touched = make(map[int64]struct{})
	h.mu.Unlock()

	ng := newGraph(old.dim, opt)
	err := ng.addBatch(ctx, ids, vecs, opt.Workers, &h.pool)

	h.mu.Lock()
	defer h.mu.Unlock()
	touched := h.touched
	h.touched = nil
	if err != nil {
		return fmt.Errorf("vector: rebuild: %w", err)
	}
	s := h.pool.Get().(*searcher)
	defer h.pool.Put(s)
	for id := range touched {
		if n, ok := h.g.byID[id]; ok {
			ng.add(id, h.g.vec(n), s)
		} else {
			ng.delete(id)
		}
	}
	h.g = ng
	return nil
}
