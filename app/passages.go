package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
// fidelity table of `lore bench ttft --fidelity` favoured (see README).
const DefaultPassageRepair = 16

// passageCacher is a chat model that can save passage KV (engine.Model).
type passageCacher interface {
	CachePassage(ctx context.Context, prefix, passage string) (engine.Stats, error)
}

// passageQueue is the background work of saving passages' KV: one at a
// time, newest first (the passages of the draft being typed matter most),
// each passage once per model.
type passageQueue struct {
	mu      sync.Mutex
	todo    []passageJob
	queued  map[string]bool // model and text of every job queued or done
	running bool
	saved   int // passages saved since start
	failed  int
}

type passageJob struct {
	model, prefix, text string
	rank                int // in the retrieval that queued it
}

// maxPassageJobs bounds the queue; older jobs are dropped first.
const maxPassageJobs = 256

// stitchFor returns how this question's prompt may use saved passage KV
// (nil: it may not), recording the decision in the trace.
func (x *ask) stitchFor() *engine.Stitch {
	if !x.s.PassageKV || x.parts == nil {
		return nil
	}
	refuse := func(why string) *engine.Stitch {
		x.t.Stitch, x.t.StitchNote = "refused", why
		return nil
	}
	if _, ok := x.m.chat.(passageCacher); !ok {
		return refuse("the chat model is not local")
	}
	prefix, err := passagePrefix(x.m.chat.Template())
	if err != nil {
		return refuse(err.Error())
	}
	why, note := x.a.fidelityRefuses(x.ctx, x.m.chat.ID(), x.s.PassageRepair)
	if why != "" {
		return refuse(why)
	}
	x.t.Stitch, x.t.StitchNote = "on", note
	return &engine.Stitch{Prefix: prefix, Repair: x.s.PassageRepair}
}

// noteStitch copies what stitching did into the trace.
func (x *ask) noteStitch(st engine.Stats) {
	t := x.t
	t.StitchedPassages, t.StitchedTokens, t.RepairedTokens = st.StitchedPassages, st.StitchedTokens, st.RepairedTokens
	t.UncachedPassages = st.UncachedPassages
	if st.StitchSkipped != "" {
		t.StitchNote = strings.TrimPrefix(t.StitchNote+"; ", "; ") + st.StitchSkipped
	}
}

// queuePassages queues this prompt's passages to have their KV saved, when
// the setting is on, the chat model can and its fidelity allows stitching;
// it reports whether it did.
func (x *ask) queuePassages() bool {
	if !x.s.PassageKV || x.parts == nil || x.m.chat == nil {
		return false
	}
	if _, ok := x.m.chat.(passageCacher); !ok {
		return false
	}
	if why, _ := x.a.fidelityRefuses(x.ctx, x.m.chat.ID(), x.s.PassageRepair); why != "" {
		return false
	}
	prefix, err := passagePrefix(x.m.chat.Template())
	if err != nil {
		return false
	}
	// Best ranked last: the queue takes the newest job first, and a draft's
	// best passages are the likeliest to stay in the final question's set.
	rank := map[int64]int{}
	for i, p := range x.res.Passages {
		rank[p.ChunkID] = i
	}
	var jobs []passageJob
	n := 0
	for _, p := range x.parts {
		if !p.Passage {
			continue
		}
		r, ok := rank[x.passages[n].ChunkID]
		if !ok {
			r = len(rank) // an earlier turn's: its KV is in the conversation's prefix
		}
		jobs = append(jobs, passageJob{model: x.m.chat.ID(), prefix: prefix, text: p.Text, rank: r})
		n++
	}
	slices.SortStableFunc(jobs, func(a, b passageJob) int { return cmp.Compare(b.rank, a.rank) })
	x.a.passages.add(x.a, jobs)
	return true
}

func (q *passageQueue) add(a *App, jobs []passageJob) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queued == nil {
		q.queued = map[string]bool{}
	}
	for _, j := range jobs {
		k := j.model + "\x00" + j.text
		if q.queued[k] {
			continue
		}
		if len(q.queued) > 16*maxPassageJobs {
			clear(q.queued) // forgetting costs a store lookup, not a prefill
		}
		q.queued[k] = true
		q.todo = append(q.todo, j)
	}
	if len(q.todo) > maxPassageJobs {
		for _, j := range q.todo[:len(q.todo)-maxPassageJobs] {
			delete(q.queued, j.model+"\x00"+j.text)
		}
		q.todo = q.todo[len(q.todo)-maxPassageJobs:]
	}
	if !q.running && len(q.todo) > 0 {
		q.running = true
		go q.run(a)
	}
}

// run saves queued passages until the queue is empty or the app closes.
// A job preempted by a question is tried again after it.
func (q *passageQueue) run(a *App) {
	for {
		q.mu.Lock()
		if len(q.todo) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		j := q.todo[len(q.todo)-1]
		q.todo = q.todo[:len(q.todo)-1]
		q.mu.Unlock()

		m, let, open := a.holdOpen()
		if !open {
			q.mu.Lock()
			q.todo, q.running = nil, false
			q.mu.Unlock()
			return
		}
		pc, ok := m.chat.(passageCacher)
		if !ok || m.chat.ID() != j.model {
			let() // the model changed: its passages are the new model's to save
			continue
		}
		_, err := pc.CachePassage(context.Background(), j.prefix, j.text)
		let()
		q.mu.Lock()
		switch {
		case err == nil:
			q.saved++
		case errors.Is(err, engine.ErrPreempted):
			q.todo = append(q.todo, j)
		case errors.Is(err, engine.ErrClosed):
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
	Saved  int      `json:"saved"`
	Failed int      `json:"failed"`
	Store  kv.Stats `json:"store"`
}

// PassageKV reports the passage KV queue and the KV store.
func (a *App) PassageKV() PassageKVStats {
	q := &a.passages
	q.mu.Lock()
	defer q.mu.Unlock()
	return PassageKVStats{Queued: len(q.todo), Saved: q.saved, Failed: q.failed, Store: a.kv.Stats()}
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
