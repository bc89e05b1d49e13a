package vector

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
)

// nlocks is the number of striped node locks used while inserting from
// several goroutines. A goroutine never holds two at once, so two nodes
// sharing a stripe cannot deadlock.
const nlocks = 1024

// batchChunk is how many nodes a bulk insert links between cancellation
// checks and, in HNSW.AddBatch, between releases of the write lock: about
// 0.1 s of searches held up on 2 cores.
const batchChunk = 256

// graph is the HNSW graph proper (Malkov & Yashunin, arXiv:1603.09320).
// Its methods do no locking of their own beyond the striped node locks that
// make parallel inserts safe; HNSW serialises everything else.
type graph struct {
	dim   int
	m, m0 int // max links per node on upper layers / on layer 0
	efc   int
	ml    float64 // level multiplier 1/ln(M)

	vecs   []float32 // node n at [n*dim, (n+1)*dim)
	ids    []int64
	dead   []bool
	levels []uint8
	links0 []uint32   // node n at [n*(m0+1)]: count, then m0 slots
	upper  [][]uint32 // node n, layer l>0 at [(l-1)*(m+1)]: count, then m slots
	byID   map[int64]uint32
	ndead  int

	emu   sync.Mutex // guards entry and top during parallel inserts
	entry int32      // -1 when empty
	top   int

	locks [nlocks]sync.Mutex
	rng   *rand.Rand
}

func newGraph(dim int, o Options) *graph {
	return &graph{
		dim:   dim,
		m:     o.M,
		m0:    2 * o.M,
		efc:   o.EfConstruction,
		ml:    1 / math.Log(float64(o.M)),
		byID:  make(map[int64]uint32),
		entry: -1,
		rng:   rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)),
	}
}

func (g *graph) vec(n uint32) []float32 {
	i := int(n) * g.dim
	return g.vecs[i : i+g.dim : i+g.dim]
}

// links returns node n's list on layer l: element 0 is the count, then the
// slots.
func (g *graph) links(n uint32, l int) []uint32 {
	if l == 0 {
		i := int(n) * (g.m0 + 1)
		return g.links0[i : i+g.m0+1 : i+g.m0+1]
	}
	i := (l - 1) * (g.m + 1)
	return g.upper[n][i : i+g.m+1 : i+g.m+1]
}

// mmax is the most links a node keeps on layer l.
func (g *graph) mmax(l int) int {
	if l == 0 {
		return g.m0
	}
	return g.m
}

func (g *graph) randomLevel() int {
	l := int(-math.Log(1-g.rng.Float64()) * g.ml)
	return min(l, maxLevel)
}

// newNode appends an unlinked node for id, tombstoning the node that held
// id before. It must not run concurrently with anything.
func (g *graph) newNode(id int64, vec []float32, level int) uint32 {
	n := uint32(len(g.ids))
	if old, ok := g.byID[id]; ok {
		g.dead[old] = true
		g.ndead++
	}
	g.byID[id] = n
	g.ids = append(g.ids, id)
	g.dead = append(g.dead, false)
	g.levels = append(g.levels, uint8(level))
	g.vecs = append(g.vecs, vec...)
	g.links0 = append(g.links0, make([]uint32, g.m0+1)...)
	var up []uint32
	if level > 0 {
		up = make([]uint32, level*(g.m+1))
	}
	g.upper = append(g.upper, up)
	return n
}

func (g *graph) delete(id int64) {
	if n, ok := g.byID[id]; ok {
		g.dead[n] = true
		g.ndead++
		delete(g.byID, id)
	}
}

// add inserts one vector. It must not run concurrently with anything.
func (g *graph) add(id int64, vec []float32, s *searcher) {
	n := g.newNode(id, vec, g.randomLevel())
	g.insert(n, s)
}

// addBatch inserts vecs[i] under ids[i] using up to workers goroutines,
// checking ctx every batchChunk nodes; on cancellation the nodes already
// linked stay. It must not run concurrently with anything else.
func (g *graph) addBatch(ctx context.Context, ids []int64, vecs [][]float32, workers int, pool *sync.Pool) error {
	for start := 0; start < len(ids); start += batchChunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		end := min(start+batchChunk, len(ids))
		first := uint32(len(g.ids))
		for i := start; i < end; i++ {
			g.newNode(ids[i], vecs[i], g.randomLevel())
		}
		g.link(first, uint32(len(g.ids)), workers, pool)
	}
	return nil
}

// link inserts the unlinked nodes [from, to) into the graph in parallel.
func (g *graph) link(from, to uint32, workers int, pool *sync.Pool) {
	workers = max(1, min(workers, int(to-from)))
	if workers == 1 {
		s := pool.Get().(*searcher)
		for n := from; n < to; n++ {
			g.insert(n, s)
		}
		pool.Put(s)
		return
	}
	var next atomic.Uint32
	next.Store(from)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			s := pool.Get().(*searcher)
			defer pool.Put(s)
			for {
				n := next.Add(1) - 1
				if n >= to {
					return
				}
				g.insert(n, s)
			}
		})
	}
	wg.Wait()
}

// insert links node n into the graph (algorithm 1 of the paper). It may run
// concurrently with other inserts of distinct nodes.
func (g *graph) insert(n uint32, s *searcher) {
	q := g.vec(n)
	lvl := int(g.levels[n])

	g.emu.Lock()
	ep, top := g.entry, g.top
	if ep < 0 {
		g.entry, g.top = int32(n), lvl
		g.emu.Unlock()
		return
	}
	// A node that raises the top level keeps emu until it is linked and
	// installed as the entry point, which serialises changes of the top
	// level. It happens about log_M(n) times in a build.
	hold := lvl > top
	if !hold {
		g.emu.Unlock()
	}

	cur := item{-Dot(q, g.vec(uint32(ep))), uint32(ep)}
	for l := top; l > lvl; l-- {
		cur = g.greedy(q, cur, l, s, true)
	}
	s.eps = append(s.eps[:0], cur)
	for l := min(top, lvl); l >= 0; l-- {
		res := g.searchLayer(q, s.eps, g.efc, l, s, true, false, n)
		s.cands = drainAsc(res, s.cands)
		mmax := g.mmax(l)
		s.sel = g.selectNeighbors(s.cands, g.m, s.sel)

		g.locks[n%nlocks].Lock()
		own := g.links(n, l)
		// Links that parallel inserts already made from n are kept while
		// there is room.
		prev := append(s.buf[:0], own[1:1+own[0]]...)
		for i, it := range s.sel {
			own[1+i] = it.n
		}
		k := len(s.sel)
		for _, x := range prev {
			if k < mmax && !slices.Contains(own[1:1+k], x) {
				own[1+k] = x
				k++
			}
		}
		own[0] = uint32(k)
		s.buf = prev
		g.locks[n%nlocks].Unlock()

		for _, it := range s.sel {
			g.connect(it.n, n, it.d, l, mmax, s)
		}
		s.eps = append(s.eps[:0], s.cands...)
	}

	if hold {
		if lvl > g.top {
			g.entry, g.top = int32(n), lvl
		}
		g.emu.Unlock()
	}
}

// connect adds a link e -> n on layer l, where d is their distance. A full
// list is pruned back to mmax links with the selection heuristic.
func (g *graph) connect(e, n uint32, d float32, l, mmax int, s *searcher) {
	mu := &g.locks[e%nlocks]
	mu.Lock()
	defer mu.Unlock()
	ls := g.links(e, l)
	cnt := int(ls[0])
	// With parallel inserts, n may have found e while e was linking to n.
	if slices.Contains(ls[1:1+cnt], n) {
		return
	}
	if cnt < mmax {
		ls[1+cnt] = n
		ls[0]++
		return
	}
	ev := g.vec(e)
	c := append(s.tmp[:0], item{d, n})
	for _, x := range ls[1 : 1+cnt] {
		c = append(c, item{-Dot(ev, g.vec(x)), x})
	}
	slices.SortFunc(c, func(a, b item) int {
		switch {
		case a.d < b.d:
			return -1
		case a.d > b.d:
			return 1
		}
		return 0
	})
	s.tmp = c
	s.pruned = g.selectNeighbors(c, mmax, s.pruned)
	ls[0] = uint32(len(s.pruned))
	for i, it := range s.pruned {
		ls[1+i] = it.n
	}
}

// selectNeighbors is the heuristic of algorithm 4: walking candidates from
// nearest, keep one only if it is nearer to the base than to every one
// already kept. That favours links in diverse directions, which keeps
// clusters connected to each other. cands must be sorted nearest first.
func (g *graph) selectNeighbors(cands []item, m int, out []item) []item {
	out = out[:0]
	for _, c := range cands {
		if len(out) >= m {
			break
		}
		cv := g.vec(c.n)
		ok := true
		for _, r := range out {
			if -Dot(cv, g.vec(r.n)) < c.d {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, c)
		}
	}
	return out
}

// neighbours copies node n's layer-l list into s.buf, under its node lock if
// lock is set.
func (g *graph) neighbours(n uint32, l int, s *searcher, lock bool) []uint32 {
	if lock {
		g.locks[n%nlocks].Lock()
	}
	ls := g.links(n, l)
	s.buf = append(s.buf[:0], ls[1:1+ls[0]]...)
	if lock {
		g.locks[n%nlocks].Unlock()
	}
	return s.buf
}

// greedy walks layer l from cur to a local minimum of distance to q.
func (g *graph) greedy(q []float32, cur item, l int, s *searcher, lock bool) item {
	for changed := true; changed; {
		changed = false
		for _, e := range g.neighbours(cur.n, l, s, lock) {
			if d := -Dot(q, g.vec(e)); d < cur.d {
				cur = item{d, e}
				changed = true
			}
		}
	}
	return cur
}

// none is a node number that names no node.
const none = math.MaxUint32

// searchLayer is the beam search of algorithm 2: it returns (in s.res, as a
// max-heap) the ef nearest nodes to q on layer l reachable from eps. With
// live set, tombstoned nodes are walked through but not returned, so a
// search keeps going until it has ef live results or runs out of graph.
// Node self is neither walked nor returned: during parallel inserts another
// goroutine may already have linked to the node being inserted.
func (g *graph) searchLayer(q []float32, eps []item, ef, l int, s *searcher, lock, live bool, self uint32) maxHeap {
	s.reset(len(g.ids))
	if self != none {
		s.visit(self)
	}
	s.cand = s.cand[:0]
	s.res = s.res[:0]
	for _, ep := range eps {
		if !s.visit(ep.n) {
			continue
		}
		s.cand.push(ep)
		if !live || !g.dead[ep.n] {
			s.res.push(ep)
			if len(s.res) > ef {
				s.res.pop()
			}
		}
	}
	for len(s.cand) > 0 {
		c := s.cand.pop()
		if len(s.res) >= ef && c.d > s.res[0].d {
			break
		}
		for _, e := range g.neighbours(c.n, l, s, lock) {
			if !s.visit(e) {
				continue
			}
			d := -Dot(q, g.vec(e))
			if len(s.res) < ef || d < s.res[0].d {
				s.cand.push(item{d, e})
				if !live || !g.dead[e] {
					s.res.push(item{d, e})
					if len(s.res) > ef {
						s.res.pop()
					}
				}
			}
		}
	}
	return s.res
}

// search returns the k nearest live nodes to q, nearest first.
func (g *graph) search(q []float32, k, ef int, s *searcher) []item {
	if g.entry < 0 || k <= 0 {
		return nil
	}
	ep := uint32(g.entry)
	cur := item{-Dot(q, g.vec(ep)), ep}
	for l := g.top; l > 0; l-- {
		cur = g.greedy(q, cur, l, s, false)
	}
	s.eps = append(s.eps[:0], cur)
	res := g.searchLayer(q, s.eps, max(ef, k), 0, s, false, true, none)
	out := drainAsc(res, s.cands)
	s.cands = out
	return out[:min(k, len(out))]
}

// drainAsc empties the max-heap h into dst, nearest first.
func drainAsc(h maxHeap, dst []item) []item {
	n := len(h)
	dst = slices.Grow(dst[:0], n)[:n]
	for i := n - 1; i >= 0; i-- {
		dst[i] = h.pop()
	}
	return dst
}

// searcher is per-goroutine scratch space, reused through a sync.Pool so
// that searches and inserts allocate nothing in the steady state.
type searcher struct {
	mark                         []uint32 // visited[n] == gen means visited in this pass
	gen                          uint32
	cand                         minHeap
	res                          maxHeap
	buf                          []uint32
	eps, cands, sel, tmp, pruned []item
}

func (s *searcher) reset(n int) {
	s.gen++
	if s.gen == 0 {
		clear(s.mark)
		s.gen = 1
	}
	if len(s.mark) < n {
		s.mark = slices.Grow(s.mark, n-len(s.mark)+n/4)[:n]
	}
}

func (s *searcher) visit(n uint32) bool {
	if s.mark[n] == s.gen {
		return false
	}
	s.mark[n] = s.gen
	return true
}
