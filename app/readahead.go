package app

import (
	"context"
	"sync"
	"time"

	"lore/engine"
	"lore/index/retrieve"
)

// readAhead is reading the prompt ahead while the user types: the drafts
// and questions in order, what the chat model's speculative sequence holds
// or is reading (spec), and what its answer sequence holds after the last
// question (answered). It has its own lock, and nothing outside this file
// touches its state (TestHousePlan).
type readAhead struct {
	mu       sync.Mutex
	spec     *reading    // what the speculative sequence holds
	answered *heldLayout // what the answer sequence holds, after the last question
	drafts   int         // prefetches received: the newest one wins
	asks     int         // questions asked: a draft still retrieving when one comes is too late
	// untilAsk ends (endDrafts, cause engine.ErrSuperseded) when a question
	// is asked: the drafts' model work still waiting then would only run
	// after the answer, and undo it (the answer sequence trimmed).
	untilAsk   context.Context
	endDrafts  context.CancelCauseFunc
	prefetched map[string]time.Time // each client's last prefetch
	life       context.Context      // the app's
	// watchers get the status after every change; each holds at most
	// the latest (a slow reader skips what it no longer needs).
	watchers map[chan PrefetchStatus]struct{}
	sent     PrefetchStatus // the last status handed to them
}

func newReadAhead(life context.Context) *readAhead {
	r := &readAhead{prefetched: map[string]time.Time{}, life: life, watchers: map[chan PrefetchStatus]struct{}{}}
	r.untilAsk, r.endDrafts = context.WithCancelCause(life)
	return r
}

// draftTurn is where a draft stands among drafts and questions.
type draftTurn struct{ draft, asks int }

// draft counts a new draft and says where it stands.
func (r *readAhead) draft() draftTurn {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drafts++
	return draftTurn{r.drafts, r.asks}
}

// asked says that a question is asked: drafts still retrieving are too
// late, and the drafts' model work still waiting is superseded.
func (r *readAhead) asked() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asks++
	r.endDrafts(engine.ErrSuperseded)
	r.untilAsk, r.endDrafts = context.WithCancelCause(r.life)
}

// begin makes sp what the speculative sequence reads, unless a newer draft
// or a question came since turn, or the sequence holds (or is reading) the
// same prompt already: then it says why not. trim drops what the answer
// sequence held (the caller cuts it back to the system prefix). The
// reading lasts until untilAsk ends.
func (r *readAhead) begin(turn draftTurn, sp *reading, trim bool) (untilAsk context.Context, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch old := r.spec; {
	case turn.draft != r.drafts:
		return nil, "superseded by a newer draft"
	case turn.asks != r.asks: // reading now would only slow the answer down
		return nil, "a question came first"
	case old != nil && old.key == sp.key && (!old.done || old.err == nil):
		return nil, "same passages"
	case old != nil && old.base == sp.base:
		sp.from = readPrefix(sp.passages, [][]retrieve.Passage{old.read()})
	}
	r.spec = sp
	if trim {
		r.answered = nil
	}
	r.changed()
	return r.untilAsk, ""
}

// progress records what the engine says sp's sequence holds: the text up
// to the end of its first passages.
func (r *readAhead) progress(sp *reading, passages int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sp.held, sp.reported = passages, true
	r.changed()
}

// finished records that sp's prefill returned.
func (r *readAhead) finished(sp *reading, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sp.done, sp.err = true, err
	r.changed()
}

// layouts adds to u what the chat model's sequences hold after the
// conversation base: the speculative sequence's layout (the drafts of this
// question), then the answer sequence's (the question asked again).
func (r *readAhead) layouts(base string, draft bool, u *reuse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sp := r.spec; sp != nil && sp.base == base {
		held := sp.passages
		if draft {
			// A draft keeps what the drafts have read by the question's
			// rule (while among its candidates), so that no draft throws
			// away reading the question would have kept, and the passage
			// being read: dropped whenever the candidates' order moved, its
			// part read was lost at every word typed. What is not reached
			// yet costs nothing to lay out again.
			held = sp.reached()
		}
		u.held = append(u.held, held)
		if !sp.spent && !draft {
			u.typed = true
			u.read = append(u.read, sp.read())
		}
	}
	if h := r.answered; h != nil && h.base == base {
		u.held = append(u.held, h.passages)
		u.answered = h.passages
	}
}

// claim hands a question what the speculative sequence holds or is
// reading (ok false: nothing), which is then no longer a draft's.
func (r *readAhead) claim() (reading, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sp := r.spec
	if sp == nil {
		return reading{}, false
	}
	s := *sp
	sp.spent = true
	r.changed()
	return s, true
}

// ready says whether model's speculative sequence has read, after the
// conversation base, a layout that starts with kept.
func (r *readAhead) ready(model, base string, kept []retrieve.Passage) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	sp := r.spec
	if sp == nil || !sp.done || sp.err != nil || sp.model != model || sp.base != base {
		return false
	}
	return len(kept) <= len(sp.passages) && samePassages(kept, sp.passages[:len(kept)])
}

// cut notes that a question's prefill cuts the speculative sequence back
// to what its turn (after the conversation base) shares with it.
func (r *readAhead) cut(base string, turn []retrieve.Passage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sp := r.spec
	if sp == nil {
		return
	}
	keep := 0
	if sp.base == base {
		keep = readPrefix(turn, [][]retrieve.Passage{sp.passages})
	}
	sp.passages, sp.sizes = sp.passages[:keep], sp.sizes[:keep]
	sp.from = min(sp.from, keep)
	sp.key = "" // a draft of the same passages reads them again
	r.changed()
}

// answeredWith records the layout the answer sequence holds after a
// question.
func (r *readAhead) answeredWith(h heldLayout) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answered = &h
}

// reading is what the speculative sequence holds or is reading: the
// prompt up to a draft's question.
type reading struct {
	heldLayout
	key   string // the layout's key: same key, same prompt prefix
	model string
	start time.Time
	// sizes are the passages' tokens; from is how many of them (a prefix)
	// the sequence held already when this prefill started.
	sizes []int
	from  int
	// held is how many passages the engine last said the sequence holds
	// (reported: it said something).
	held     int
	reported bool
	done     bool // the prefill returned (err says whether it stopped early)
	err      error
	spent    bool // a question came after it: it is no longer a draft of the next one
}

// read says which passages (a prefix of its layout) the speculative
// sequence holds, as the engine last reported; before its first report,
// those it held when this prefill started (a draft superseded mid-way
// leaves the sequence cut back to what the next draft shares with it, so
// what it read carries over: from).
func (sp *reading) read() []retrieve.Passage {
	switch {
	case sp.done && sp.err == nil:
		return sp.passages
	case !sp.reported:
		return sp.passages[:sp.from]
	}
	return sp.passages[:min(sp.held, len(sp.passages))] // cut may have shortened the layout since
}

// reached is what read says and, while the prefill has not finished, the
// passage it is in the middle of (its cells so far stay in the sequence).
func (sp *reading) reached() []retrieve.Passage {
	r := sp.read()
	if sp.done && sp.err == nil || len(r) == len(sp.passages) {
		return r
	}
	return sp.passages[:len(r)+1]
}

// heldLayout is the turn a sequence's prompt holds: base names the model,
// workspace and conversation before the turn, passages are the turn's in
// prompt order.
type heldLayout struct {
	base     string
	passages []retrieve.Passage
}

// PrefetchStatus reports what the speculative sequence holds or is
// reading for the next question.
func (a *App) PrefetchStatus() PrefetchStatus { return a.ahead.status() }

// WatchPrefetch follows the read-ahead: the status now, then every status
// after a change (only the latest, when the reader is slower than the
// changes), until stop or ctx ends.
func (a *App) WatchPrefetch(ctx context.Context) (<-chan PrefetchStatus, func()) {
	return a.ahead.watch(ctx)
}

func (r *readAhead) watch(ctx context.Context) (<-chan PrefetchStatus, func()) {
	ch := make(chan PrefetchStatus, 1)
	r.mu.Lock()
	r.watchers[ch] = struct{}{}
	ch <- r.statusLocked()
	r.mu.Unlock()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			r.mu.Lock()
			delete(r.watchers, ch)
			r.mu.Unlock()
		})
	}
	unhook := context.AfterFunc(ctx, stop)
	return ch, func() { unhook(); stop() }
}

// changed hands the status, when it differs from the last, to every
// watcher, replacing one it has not taken yet. r.mu is held.
func (r *readAhead) changed() {
	st := r.statusLocked()
	if st == r.sent {
		return
	}
	r.sent = st
	for ch := range r.watchers {
		select {
		case <-ch:
		default:
		}
		ch <- st // the buffer is free: only changed sends, under r.mu
	}
}

func (r *readAhead) status() PrefetchStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.statusLocked()
}

func (r *readAhead) statusLocked() PrefetchStatus {
	sp := r.spec
	if sp == nil || sp.spent {
		return PrefetchStatus{State: ReadAheadNone}
	}
	st := PrefetchStatus{State: ReadAheadReading, Passages: len(sp.passages)}
	switch {
	case sp.done && sp.err == nil:
		st.State = ReadAheadReady
	case sp.done:
		st.State = ReadAheadStopped
	}
	st.Read = len(sp.read())
	for i, n := range sp.sizes {
		st.Tokens += n
		if i < st.Read {
			st.ReadTokens += n
		}
	}
	return st
}

// limit allows one prefetch per client per prefetchInterval.
func (r *readAhead) limit(client string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if last, ok := r.prefetched[client]; ok && now.Sub(last) < prefetchInterval {
		return ErrRateLimited
	}
	if len(r.prefetched) > 1024 {
		clear(r.prefetched)
	}
	r.prefetched[client] = now
	return nil
}
