package vector

// item is a graph node with its distance to the current query.
type item struct {
	d float32 // distance: negated dot product, smaller is nearer
	n uint32  // node number
}

// minHeap pops the nearest item first. The methods are written out rather
// than going through container/heap to avoid interface calls on the hot path.
type minHeap []item

func (h *minHeap) push(it item) {
	s := append(*h, it)
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if s[p].d <= it.d {
			break
		}
		s[i] = s[p]
		i = p
	}
	s[i] = it
	*h = s
}

func (h *minHeap) pop() item {
	s := *h
	top := s[0]
	last := s[len(s)-1]
	s = s[:len(s)-1]
	if len(s) > 0 {
		minDown(s, last)
	}
	*h = s
	return top
}

// maxHeap keeps the farthest item on top, so it can hold the best ef results
// and evict the worst.
type maxHeap []item

func (h *maxHeap) push(it item) {
	s := append(*h, it)
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if s[p].d >= it.d {
			break
		}
		s[i] = s[p]
		i = p
	}
	s[i] = it
	*h = s
}

func (h *maxHeap) pop() item {
	s := *h
	top := s[0]
	last := s[len(s)-1]
	s = s[:len(s)-1]
	if len(s) > 0 {
		maxDown(s, last)
	}
	*h = s
	return top
}

// minDown places it at the root of s and restores min-heap order.
func minDown(s []item, it item) {
	i, n := 0, len(s)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && s[r].d < s[c].d {
			c = r
		}
		if s[c].d >= it.d {
			break
		}
		s[i] = s[c]
		i = c
	}
	s[i] = it
}

// maxDown places it at the root of s and restores max-heap order.
func maxDown(s []item, it item) {
	i, n := 0, len(s)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && s[r].d > s[c].d {
			c = r
		}
		if s[c].d <= it.d {
			break
		}
		s[i] = s[c]
		i = c
	}
	s[i] = it
}
