package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"lore/engine"
	"lore/engine/kv"
)

// Passage KV (Settings.PassageKV). Every passage that goes into a prompt or
// a draft's prompt is queued to have its KV saved once, at background
// priority: read after a fixed prefix (passagePrefix) and kept in the
// model's KV store. A later prompt that holds the passage, under any number
// and at any position, stitches that KV in instead of reading the passage
// (engine.Stitch), re-reading only its first PassageRepair tokens. It is an
// approximation (a stitched passage has not attended to the sources before
// it), so it is off by default, labelled approximate in the UI, and refused
// for a model whose measured fidelity (MeasureFidelity) is below the floor.

// DefaultPassageRepair is Settings.PassageRepair's default: the k that the
// fidelity table of `lore bench ttft --fidelity` favoured (docs/performance.md).
const DefaultPassageRepair = 16

// passageQueue is the background work of saving passages' KV: one at a
// time, newest first (the passages of the draft being typed matter most).
// A passage already saved costs a store lookup when it is queued again, so
// the queue remembers only the jobs pending: an evicted passage, or one of
// a model switched away from and back to, is saved again.
type passageQueue struct {
	mu      sync.Mutex
	todo    []passageJob
	pending map[string]bool // model and text of every job queued or being saved
	running bool
	saved   int // passages saved since start
	failed  int

	ctx    context.Context // the worker's, cancelled by stop
	cancel context.CancelFunc
	closed bool
	wg     sync.WaitGroup
}

type passageJob struct {
	model, prefix, text string
	rank                int // in the retrieval that queued it
}

// maxPassageJobs bounds the queue; older jobs are dropped first.
const maxPassageJobs = 256

// stitchFor returns how this question's prompt may use saved passage KV:
// the prompt cut around its passages and the stitch (nil: it may not),
// recording the decision in the trace.
func (x *ask) stitchFor() ([]engine.Part, *engine.Stitch) {
	s := x.q.s
	parts := x.plan.prompt.parts()
	if !s.PassageKV || parts == nil {
		return nil, nil
	}
	prefix, note, why := x.a.stitchable(x.ctx, x.plan.gen, s.PassageRepair)
	if why != "" {
		x.t.Stitch, x.t.StitchNote = "refused", why
		return nil, nil
	}
	x.t.Stitch, x.t.StitchNote = "on", note
	return parts, &engine.Stitch{Prefix: prefix, Repair: s.PassageRepair}
}

// stitchable says whether gen's prompts may hold saved passage KV read
// again for repair tokens: the prefix passages are saved after and what
// the fidelity measurement says, or why not.
func (a *App) stitchable(ctx context.Context, gen Generator, repair int) (prefix, note, why string) {
	if why := cannotStitch(gen); why != "" {
		return "", "", why
	}
	prefix, err := passagePrefix(gen.Template())
	if err != nil {
		return "", "", err.Error()
	}
	why, note = a.fidelityRefuses(ctx, gen.ID(), repair)
	return prefix, note, why
}

// cannotStitch says why g's prompts can never hold saved passage KV ("":
// they can).
func cannotStitch(g Generator) string {
	l := local(g)
	switch {
	case l == nil:
		return "the chat model is not local"
	case l.Info().SlidingWindow > 0:
		return "the chat model attends through a sliding window: saved passages cannot be placed"
	}
	return ""
}

// queuePassages queues pl's passages to have their KV saved, when the
// setting is on, the chat model can and its fidelity allows stitching; it
// reports whether it did.
func (a *App) queuePassages(ctx context.Context, s Settings, pl plan) bool {
	gen := pl.gen
	if !s.PassageKV || gen == nil {
		return false
	}
	parts := pl.prompt.parts()
	if parts == nil {
		return false
	}
	prefix, _, why := a.stitchable(ctx, gen, s.PassageRepair)
	if why != "" {
		return false
	}
	// Best ranked last: the queue takes the newest job first, and a draft's
	// best passages are the likeliest to stay in the final question's set.
	rank := map[int64]int{}
	for i, p := range pl.candidates {
		rank[p.ChunkID] = i
	}
	var jobs []passageJob
	n := 0
	for _, p := range parts {
		if !p.Passage {
			continue
		}
		id := pl.passages[n].ChunkID
		n++
		if c := pl.prompt.cut; c != nil && id == c.ChunkID {
			continue // cut for this question only
		}
		r, ok := rank[id]
		if !ok {
			r = len(rank) // an earlier turn's: its KV is in the conversation's prefix
		}
		jobs = append(jobs, passageJob{model: gen.ID(), prefix: prefix, text: p.Text, rank: r})
	}
	slices.SortStableFunc(jobs, func(a, b passageJob) int { return cmp.Compare(b.rank, a.rank) })
	a.passages.add(a, jobs)
	return true
}

func (j passageJob) key() string { return j.model + "\x00" + j.text }

func (q *passageQueue) add(a *App, jobs []passageJob) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if q.pending == nil {
		q.pending = map[string]bool{}
		q.ctx, q.cancel = context.WithCancel(context.Background())
	}
	for _, j := range jobs {
		if !q.pending[j.key()] {
			q.pending[j.key()] = true
			q.todo = append(q.todo, j)
		}
	}
	if len(q.todo) > maxPassageJobs {
		for _, j := range q.todo[:len(q.todo)-maxPassageJobs] {
			delete(q.pending, j.key())
		}
		q.todo = q.todo[len(q.todo)-maxPassageJobs:]
	}
	if !q.running && len(q.todo) > 0 {
		q.running = true
		q.wg.Add(1)
		go q.run(a)
	}
}

// stop drops the queued jobs, cancels the one being saved and waits for
// the worker: after it no passage is saved, and add does nothing.
func (q *passageQueue) stop() {
	q.mu.Lock()
	q.closed, q.todo = true, nil
	if q.cancel != nil {
		q.cancel()
	}
	q.mu.Unlock()
	q.wg.Wait()
}

// run saves queued passages until the queue is empty or stopped. A job
// preempted by a question is tried again after it.
func (q *passageQueue) run(a *App) {
	defer q.wg.Done()
	for {
		q.mu.Lock()
		if len(q.todo) == 0 || q.ctx.Err() != nil {
			q.running = false
			q.mu.Unlock()
			return
		}
		j := q.todo[len(q.todo)-1]
		q.todo = q.todo[:len(q.todo)-1]
		q.mu.Unlock()

		var st engine.Stats
		var err error
		if m, let, open := a.holdOpen(); !open {
			err = engine.ErrClosed
		} else if pc := local(m.chat); pc != nil && m.chat.ID() == j.model {
			st, err = pc.CachePassage(q.ctx, j.prefix, j.text)
			let()
		} else {
			let() // the model changed: its passages are the new model's to save
			err = engine.ErrClosed
		}
		q.mu.Lock()
		if !errors.Is(err, engine.ErrPreempted) || q.ctx.Err() != nil {
			delete(q.pending, j.key())
		}
		switch {
		case err == nil:
			if !st.Restored { // not saved before
				q.saved++
			}
		case errors.Is(err, engine.ErrPreempted):
			if q.ctx.Err() == nil {
				q.todo = append(q.todo, j)
			}
		case errors.Is(err, engine.ErrClosed), q.ctx.Err() != nil:
			// the model was switched or the app is closing
		default:
			q.failed++
			a.log.Warn("save passage KV", "model", j.model, "err", err)
		}
		q.mu.Unlock()
	}
}

// PassageKVStats says what the passage KV queue has done, and what the KV
// store (passages and warm prefixes) holds.
type PassageKVStats struct {
	Queued int      `json:"queued"`
	Saving bool     `json:"saving"` // a job is being saved, or waits its turn
	Saved  int      `json:"saved"`
	Failed int      `json:"failed"`
	Store  kv.Stats `json:"store"`
}

// PassageKV reports the passage KV queue and the KV store.
func (a *App) PassageKV() PassageKVStats {
	q := &a.passages
	q.mu.Lock()
	defer q.mu.Unlock()
	return PassageKVStats{Queued: len(q.todo), Saving: q.running, Saved: q.saved, Failed: q.failed, Store: a.kv.Stats()}
}

// WaitPassages blocks until the passage KV queue is empty (or ctx ends).
func (a *App) WaitPassages(ctx context.Context) error {
	for {
		q := &a.passages
		q.mu.Lock()
		idle := !q.running
		q.mu.Unlock()
		if idle {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for passage KV: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
