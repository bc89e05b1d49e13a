package vector

import (
	"context"
	"fmt"
	"io"
	"sync"
)

// Auto answers from an Exact index while the corpus is small and switches
// to an HNSW once it holds more than Options.Crossover vectors.
//
// The default crossover, 10,000, comes from cmd/vecbench on the 2-core
// build machine (384-d clustered vectors, AVX2 dot product, defaults M=16
// efC=100 efS=96, 500 queries one at a time; P50 in ms):
//
//	  n        exact   hnsw   hnsw build
//	  1,000    0.024   0.033  0.05 s
//	  2,000    0.045   0.042  0.09 s
//	  5,000    0.107   0.053  0.4 s
//	 10,000    0.250   0.093  1.3 s
//	 20,000    0.93    0.155  4 s
//	 50,000    3.0     0.17   19 s
//	100,000    5.3     0.24   26 s
//
// HNSW overtakes exact search at about 2k vectors, but up to 10k exact
// search stays under 0.3 ms, is exact, and needs no build; past that its
// vectors outgrow the CPU cache and it climbs to milliseconds.
type Auto struct {
	mu         sync.RWMutex
	dim        int
	opt        Options
	idx        Index              // *Exact, then *HNSW
	converting map[int64]struct{} // ids changed during the switch; nil otherwise
}

var _ Index = (*Auto)(nil)

// NewAuto returns an empty Auto index for vectors of length dim.
func NewAuto(dim int, opt Options) (*Auto, error) {
	e, err := NewExact(dim)
	if err != nil {
		return nil, err
	}
	return AutoFrom(e, opt)
}

// AutoFrom wraps an index returned by Load (or built by hand) so that it
// switches to HNSW when it grows past the crossover.
func AutoFrom(idx Index, opt Options) (*Auto, error) {
	opt = opt.withDefaults()
	if err := opt.validate(); err != nil {
		return nil, err
	}
	var dim int
	switch x := idx.(type) {
	case *Exact:
		dim = x.Dim()
	case *HNSW:
		dim = x.Dim()
	default:
		return nil, fmt.Errorf("vector: Auto cannot wrap %T", idx)
	}
	return &Auto{dim: dim, opt: opt, idx: idx}, nil
}

// Dim reports the vector length.
func (a *Auto) Dim() int { return a.dim }

// Inner returns the index currently answering searches.
func (a *Auto) Inner() Index {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.idx
}

// Add stores vec under id. The Add that takes the corpus past the crossover
// builds the HNSW before returning; searches and other updates carry on
// against the exact index meanwhile.
func (a *Auto) Add(id int64, vec []float32) error {
	a.mu.Lock()
	if err := a.idx.Add(id, vec); err != nil {
		a.mu.Unlock()
		return err
	}
	if a.converting != nil {
		a.converting[id] = struct{}{}
	}
	e, ok := a.idx.(*Exact)
	if !ok || a.converting != nil || e.Len() <= a.opt.Crossover {
		a.mu.Unlock()
		return nil
	}
	a.converting = make(map[int64]struct{})
	var ids []int64
	var vecs [][]float32
	e.each(func(id int64, v []float32) {
		ids = append(ids, id)
		vecs = append(vecs, append([]float32(nil), v...)) // Exact reuses slots
	})
	a.mu.Unlock()

	h, err := NewHNSW(a.dim, a.opt)
	if err == nil {
		err = h.AddBatch(context.Background(), ids, vecs)
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	touched := a.converting
	a.converting = nil
	if err != nil {
		// The exact index is still whole and current; stay on it.
		return nil
	}
	for id := range touched {
		if v, ok := e.get(id); ok {
			if err := h.Add(id, v); err != nil {
				return nil
			}
		} else {
			h.Delete(id)
		}
	}
	a.idx = h
	return nil
}

// Delete removes id.
func (a *Auto) Delete(id int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.idx.Delete(id)
	if a.converting != nil {
		a.converting[id] = struct{}{}
	}
}

// Search returns up to k vectors nearest to query, best first.
func (a *Auto) Search(query []float32, k int) []Result {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.idx.Search(query, k)
}

// Len reports the number of live vectors.
func (a *Auto) Len() int {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.idx.Len()
}

// Rebuild drops HNSW tombstones (see HNSW.Rebuild); on an exact index it
// does nothing.
func (a *Auto) Rebuild(ctx context.Context) error {
	if h, ok := a.Inner().(*HNSW); ok {
		return h.Rebuild(ctx)
	}
	return nil
}

// MaybeRebuild is HNSW.MaybeRebuild; on an exact index it does nothing.
func (a *Auto) MaybeRebuild(ctx context.Context) (bool, error) {
	if h, ok := a.Inner().(*HNSW); ok {
		return h.MaybeRebuild(ctx)
	}
	return false, nil
}

// Save writes the inner index; Load returns it and AutoFrom wraps it again.
func (a *Auto) Save(w io.Writer) error {
	return a.Inner().(Saver).Save(w)
}
