package retrieve

import (
	"container/list"
	"sync"
	"sync/atomic"
)

// lru is a bounded least-recently-used map, safe for concurrent use, that
// counts its hits and misses.
type lru[K comparable, V any] struct {
	mu    sync.Mutex
	cap   int
	ll    *list.List // front is most recent; elements hold *entry[K, V]
	items map[K]*list.Element

	hits, misses atomic.Uint64
}

type entry[K comparable, V any] struct {
	key K
	val V
}

func newLRU[K comparable, V any](capacity int) *lru[K, V] {
	return &lru[K, V]{cap: max(capacity, 1), ll: list.New(), items: make(map[K]*list.Element)}
}

// get returns the value under k. A value that valid rejects counts as a
// miss and is dropped: it can never become valid again.
func (c *lru[K, V]) get(k K, valid func(V) bool) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		v := e.Value.(*entry[K, V]).val
		if valid == nil || valid(v) {
			c.ll.MoveToFront(e)
			c.hits.Add(1)
			return v, true
		}
		c.ll.Remove(e)
		delete(c.items, k)
	}
	c.misses.Add(1)
	var zero V
	return zero, false
}

func (c *lru[K, V]) put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		e.Value.(*entry[K, V]).val = v
		c.ll.MoveToFront(e)
		return
	}
	c.items[k] = c.ll.PushFront(&entry[K, V]{k, v})
	for c.ll.Len() > c.cap {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.items, old.Value.(*entry[K, V]).key)
	}
}

func (c *lru[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
