package vector

import (
	"slices"
	"sync"
)

// Exact is a brute-force index: every search scores every vector. It is
// exact, cheap to update, and faster than HNSW on small corpora.
type Exact struct {
	mu   sync.RWMutex
	dim  int
	vecs []float32 // vector i at [i*dim, (i+1)*dim)
	ids  []int64
	pos  map[int64]int // id -> slot
}

var _ Index = (*Exact)(nil)

// NewExact returns an empty exact index for vectors of length dim.
func NewExact(dim int) (*Exact, error) {
	if err := checkDim(dim); err != nil {
		return nil, err
	}
	return &Exact{dim: dim, pos: make(map[int64]int)}, nil
}

// Dim reports the vector length.
func (e *Exact) Dim() int { return e.dim }

// Add stores vec under id, replacing the previous vector for id.
func (e *Exact) Add(id int64, vec []float32) error {
	if err := checkVec(vec, e.dim); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if i, ok := e.pos[id]; ok {
		copy(e.vecs[i*e.dim:(i+1)*e.dim], vec)
		return nil
	}
	e.pos[id] = len(e.ids)
	e.ids = append(e.ids, id)
	e.vecs = append(e.vecs, vec...)
	return nil
}

// Delete removes id by moving the last vector into its slot.
func (e *Exact) Delete(id int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	i, ok := e.pos[id]
	if !ok {
		return
	}
	last := len(e.ids) - 1
	if i != last {
		copy(e.vecs[i*e.dim:(i+1)*e.dim], e.vecs[last*e.dim:])
		e.ids[i] = e.ids[last]
		e.pos[e.ids[i]] = i
	}
	e.ids = e.ids[:last]
	e.vecs = e.vecs[:last*e.dim]
	delete(e.pos, id)
}

// Len reports the number of vectors.
func (e *Exact) Len() int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return len(e.ids)
}

// Search scores every vector and returns the k best. A query of the wrong
// length returns nil.
func (e *Exact) Search(query []float32, k int) []Result {
	if len(query) != e.dim || k <= 0 {
		return nil
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	k = min(k, len(e.ids))
	if k == 0 {
		return nil
	}
	top := make(maxHeap, 0, k+1)
	for i := range e.ids {
		d := -Dot(query, e.vecs[i*e.dim:(i+1)*e.dim])
		if len(top) < k {
			top.push(item{d, uint32(i)})
		} else if d < top[0].d {
			top[0] = item{d, uint32(i)}
			maxDown(top, top[0])
		}
	}
	return e.results(top)
}

// results drains a heap of slots into results, best first. Ties are ordered
// by id so that equal corpora give equal answers.
func (e *Exact) results(top maxHeap) []Result {
	out := make([]Result, len(top))
	for i, it := range top {
		out[i] = Result{ID: e.ids[it.n], Score: -it.d}
	}
	sortResults(out)
	return out
}

func sortResults(rs []Result) {
	slices.SortFunc(rs, func(a, b Result) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
}

// each calls fn for every stored vector under the read lock, in slot order.
func (e *Exact) each(fn func(id int64, vec []float32)) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	for i, id := range e.ids {
		fn(id, e.vecs[i*e.dim:(i+1)*e.dim])
	}
}

// get returns a copy of id's vector.
func (e *Exact) get(id int64) ([]float32, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	i, ok := e.pos[id]
	if !ok {
		return nil, false
	}
	return append([]float32(nil), e.vecs[i*e.dim:(i+1)*e.dim]...), true
}
