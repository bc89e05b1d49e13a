package engine

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"
)

// Priority orders waiting work: an interactive question goes before
// background work such as embedding during indexing.
type Priority int

const (
	Background  Priority = 0
	Interactive Priority = 10
)

type priorityKey struct{}

// WithPriority marks the work done under ctx with p.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

func priorityOf(ctx context.Context) Priority {
	if p, ok := ctx.Value(priorityKey{}).(Priority); ok {
		return p
	}
	return Interactive
}

// ErrBusy is returned at once when the queue is full.
var ErrBusy = errors.New("engine busy: too many requests waiting")

// ErrPreempted is the cause of a preemptible holder's context (see
// AcquirePreemptible) when work of a higher priority starts waiting.
var ErrPreempted = errors.New("preempted by higher-priority work")

// Queue admits one holder at a time; others wait in priority order (FIFO
// within a priority). Beyond its capacity it refuses at once.
type Queue struct {
	mu       sync.Mutex
	busy     bool
	capacity int
	seq      uint64
	waiting  waiters
	served   uint64
	waitSum  time.Duration
	// preempt, while set, cancels the current holder's context; it is set
	// only for a holder that asked to be preemptible, of priority holder.
	preempt context.CancelCauseFunc
	holder  Priority
	// reserved counts the reservations of each priority (Reserve): work
	// below the highest waits as if that reservation were waiting.
	reserved map[Priority]int
}

// QueueStats is a snapshot of a queue.
type QueueStats struct {
	Waiting  int     `json:"waiting"`
	Busy     bool    `json:"busy"`
	Served   uint64  `json:"served"`
	MeanWait float64 `json:"mean_wait_ms"`
}

// NewQueue returns a queue that holds at most capacity waiters (0 means no limit).
func NewQueue(capacity int) *Queue { return &Queue{capacity: capacity} }

type waiter struct {
	prio  Priority
	seq   uint64
	ready chan struct{}
	index int
}

type waiters []*waiter

func (w waiters) Len() int { return len(w) }
func (w waiters) Less(i, j int) bool {
	if w[i].prio != w[j].prio {
		return w[i].prio > w[j].prio
	}
	return w[i].seq < w[j].seq
}
func (w waiters) Swap(i, j int) { w[i], w[j] = w[j], w[i]; w[i].index = i; w[j].index = j }
func (w *waiters) Push(x any)   { v := x.(*waiter); v.index = len(*w); *w = append(*w, v) }
func (w *waiters) Pop() any {
	old := *w
	v := old[len(old)-1]
	*w = old[:len(old)-1]
	v.index = -1
	return v
}

// Acquire waits for the queue's turn at the priority carried by ctx. It
// returns a release func and how long it waited.
func (q *Queue) Acquire(ctx context.Context) (release func(), waited time.Duration, err error) {
	start := time.Now()
	prio := priorityOf(ctx)
	q.mu.Lock()
	if !q.busy && len(q.waiting) == 0 && !q.heldBack(prio) {
		q.busy = true
		q.served++
		q.mu.Unlock()
		return q.release, 0, nil
	}
	if q.capacity > 0 && len(q.waiting) >= q.capacity {
		q.mu.Unlock()
		return nil, 0, ErrBusy
	}
	q.seq++
	w := &waiter{prio: prio, seq: q.seq, ready: make(chan struct{})}
	heap.Push(&q.waiting, w)
	if q.preempt != nil && w.prio > q.holder {
		q.preempt(ErrPreempted)
		q.preempt = nil
	}
	if !q.busy { // free, but held back for a reservation: maybe not from w
		q.releaseLocked()
	}
	q.mu.Unlock()

	select {
	case <-w.ready:
		waited = time.Since(start)
		q.mu.Lock()
		q.waitSum += waited
		q.mu.Unlock()
		return q.release, waited, nil
	case <-ctx.Done():
		q.mu.Lock()
		defer q.mu.Unlock()
		if w.index >= 0 {
			heap.Remove(&q.waiting, w.index)
			return nil, time.Since(start), ctx.Err()
		}
		// Handed the turn just as ctx ended: pass it on.
		q.releaseLocked()
		return nil, time.Since(start), ctx.Err()
	}
}

// Reserve keeps the queue for work of the priority carried by ctx (or
// higher) until release is called, as if that work were waiting: a
// preemptible holder of a lower priority is preempted at once, and lower
// work waits. A question reserves the chat model from Enter to its
// answer's end, so that reading ahead does not share the CPU with its
// query embedding.
func (q *Queue) Reserve(ctx context.Context) (release func()) {
	prio := priorityOf(ctx)
	q.mu.Lock()
	if q.reserved == nil {
		q.reserved = map[Priority]int{}
	}
	q.reserved[prio]++
	if q.preempt != nil && prio > q.holder {
		q.preempt(ErrPreempted)
		q.preempt = nil
	}
	q.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			if q.reserved[prio]--; q.reserved[prio] == 0 {
				delete(q.reserved, prio)
			}
			if !q.busy {
				q.releaseLocked()
			}
		})
	}
}

// heldBack reports whether work of priority p waits for a reservation.
func (q *Queue) heldBack(p Priority) bool {
	for r := range q.reserved {
		if r > p {
			return true
		}
	}
	return false
}

// AcquirePreemptible is Acquire for work that gives way: the returned
// context is derived from ctx and is cancelled, with cause ErrPreempted, as
// soon as a caller of a higher priority waits for the queue. The holder
// should stop promptly and call release, which it must call in any case.
func (q *Queue) AcquirePreemptible(ctx context.Context) (hold context.Context, release func(), waited time.Duration, err error) {
	rel, waited, err := q.Acquire(ctx)
	if err != nil {
		return nil, nil, waited, err
	}
	hold, cancel := context.WithCancelCause(ctx)
	prio := priorityOf(ctx)
	q.mu.Lock()
	if len(q.waiting) > 0 && q.waiting[0].prio > prio || q.heldBack(prio) {
		cancel(ErrPreempted) // it queued while the turn was being handed over
	} else {
		q.preempt, q.holder = cancel, prio
	}
	q.mu.Unlock()
	var once sync.Once
	return hold, func() {
		once.Do(func() {
			q.mu.Lock()
			q.preempt = nil
			q.mu.Unlock()
			cancel(nil)
			rel()
		})
	}, waited, nil
}

func (q *Queue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.releaseLocked()
}

// releaseLocked hands the turn to the first waiter, unless it is held back
// for a reservation; then the queue is free until the reservation ends.
func (q *Queue) releaseLocked() {
	if len(q.waiting) == 0 || q.heldBack(q.waiting[0].prio) {
		q.busy = false
		return
	}
	w := heap.Pop(&q.waiting).(*waiter)
	q.busy = true
	q.served++
	close(w.ready)
}

// Stats returns the queue's current length and history.
func (q *Queue) Stats() QueueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := QueueStats{Waiting: len(q.waiting), Busy: q.busy, Served: q.served}
	if q.served > 0 {
		s.MeanWait = float64(q.waitSum.Microseconds()) / 1000 / float64(q.served)
	}
	return s
}
