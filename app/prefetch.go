package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"lore/engine"
	"lore/index/retrieve"
	"lore/store"
)

// Speculative prefill: while the user types, the draft question is
// retrieved and the prompt up to the question is read into the chat
// model's speculative sequence at background priority. On Enter, a
// question whose passages match adopts that work and evaluates only the
// question; any other question runs as usual. A prefetch never delays a
// question: the engine preempts it within one micro-batch, and admission
// counts questions, not prefetches.

// PrefetchRequest is a draft question, sent as it is typed.
type PrefetchRequest struct {
	Draft     string `json:"draft"`
	Workspace string `json:"workspace"`
	ChatID    int64  `json:"chat_id,omitempty"`
	// ClientID keys the rate limit: the page's own id, else one the front
	// door gives its client.
	ClientID string `json:"client_id,omitempty"`
}

// PrefetchResult says what a prefetch started.
type PrefetchResult struct {
	Started  bool   `json:"started"`
	Reason   string `json:"reason,omitempty"` // why nothing started
	Passages int    `json:"passages"`
}

// Prefetch outcomes and miss reasons, as traces record them. A partial
// prefetch was adopted, but the question brought passages the drafts had
// not (Trace.PrefetchNewPassages), read after Enter.
const (
	PrefetchHit     = "hit"
	PrefetchPartial = "partial"
	PrefetchMiss    = "miss"
	PrefetchNone    = "none"

	MissPassages = "passages changed"
	MissModel    = "model changed"
	MissEvicted  = "evicted"
	MissTooLate  = "too late"
	MissCached   = "already cached"
)

// minDraftWords is the shortest draft worth retrieving for.
const minDraftWords = 3

// prefetchInterval is the least time between two prefetches of one client.
const prefetchInterval = 150 * time.Millisecond

// ErrRateLimited refuses a prefetch that comes too soon after the last.
var ErrRateLimited = fmt.Errorf("%w: prefetches come too fast", ErrBusy)

// Prefetch retrieves passages for a draft question and starts reading the
// prompt up to the question into the model, in the background. Newer
// drafts supersede older ones; a draft that yields the passages already
// read (or being read) does nothing.
func (a *App) Prefetch(ctx context.Context, req PrefetchRequest) (PrefetchResult, error) {
	draft := strings.TrimSpace(req.Draft)
	if !utf8.ValidString(draft) || len(draft) > MaxQuestion {
		return PrefetchResult{}, fmt.Errorf("%w: the draft must be valid text of at most %d bytes", ErrInvalid, MaxQuestion)
	}
	ws, err := a.chatPlace(ctx, req.Workspace, req.ChatID)
	if err != nil {
		return PrefetchResult{}, err
	}
	if err := a.ahead.limit(req.ClientID); err != nil {
		return PrefetchResult{}, err
	}
	turn := a.ahead.draft() // a newer draft wins even if this one's retrieval ends later, and so does a question
	if len(strings.Fields(draft)) < minDraftWords {
		return PrefetchResult{Reason: "draft too short"}, nil
	}
	m, let := a.hold()
	// The models are let go on return, or by the read-ahead that started.
	handed := false
	defer func() {
		if !handed {
			let()
		}
	}()
	if m.chat == nil {
		return PrefetchResult{Reason: "no generation model"}, nil
	}
	reader := local(m.chat)
	if reader == nil { // a remote model: its KV cache is out of reach, nothing to read ahead into
		return PrefetchResult{Reason: "remote chat model"}, nil
	}
	// The draft's retrieval and assembly run at the request's priority:
	// counting a new passage's tokens at the read-ahead's own (background)
	// priority waited for the older draft's whole prefill, which this
	// draft supersedes; asked for first, the older read gives way within a
	// micro-batch and what it read stays.
	pl, q, err := a.layOutDraft(ctx, draft, ws, req.ChatID, m)
	if err != nil {
		return PrefetchResult{}, err
	}
	res := PrefetchResult{Passages: len(pl.passages)}
	if a.queuePassages(ctx, q.s, pl) {
		// Saved passages serve whatever set the question ends with; a whole
		// draft prompt only that exact set, so the model's background time
		// goes to the passages.
		res.Reason = "passages queued for saved KV"
		return res, nil
	}
	prefix, ends, ok := pl.prompt.untilQuestion()
	if !ok {
		res.Reason = "the model's template does not keep the question last"
		return res, nil
	}
	// A draft for a new chat: the answer sequence's old conversation
	// would only slow this prefill (attention spans every cell in use),
	// so it keeps just the system prefix.
	warm := a.warmTokens()
	trim := len(q.history) == 0 && warm > 0
	sp := &reading{heldLayout: heldLayout{base: q.baseKey(m.chat), passages: pl.prompt.turn}, key: q.specKey(pl), model: m.chat.ID(),
		start: time.Now(), sizes: pl.prompt.sizes}
	untilAsk, reason := a.ahead.begin(turn, sp, trim)
	if reason != "" {
		res.Reason = reason
		return res, nil
	}
	handed = a.spawn(func(life context.Context) {
		defer let()
		// The draft's request has ended by now: the read-ahead lives until
		// a question is asked (untilAsk, which ends with the app too).
		bg, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
		defer cancel(nil)
		defer context.AfterFunc(untilAsk, func() { cancel(context.Cause(untilAsk)) })()
		if trim { // at the request's priority too: the older draft's read gives way to it
			reader.TrimSeq(bg, engine.SeqAnswer, warm)
		}
		_, err := reader.Prefetch(engine.WithProgress(bg, func(p engine.Progress) {
			if p.Marks != nil { // nil: the runner could not place them, and what was held before counts
				a.ahead.progress(sp, *p.Marks)
			}
		}), prefix, ends...)
		// A preempted prefetch keeps what it read (the question that
		// preempted it may adopt it); its error lets the same draft resume.
		a.ahead.finished(sp, err)
		if err != nil && !errors.Is(err, engine.ErrSuperseded) && !errors.Is(err, engine.ErrPreempted) && life.Err() == nil {
			a.log.Warn("prefetch", "err", err)
		}
	})
	if !handed { // the app is closing
		res.Reason = "closing"
		return res, nil
	}
	res.Started = true
	return res, nil
}

// PrefetchStatus is what the drafts have read ahead so far: the page shows
// it under the chat box, so the user sees that Enter will answer quickly.
type PrefetchStatus struct {
	// State is "none" (nothing read ahead for the next question),
	// "reading", "ready" (the latest draft's prompt is read) or "stopped"
	// (preempted or failed part-way; what was read still counts).
	State      string `json:"state"`
	Passages   int    `json:"passages"` // the latest draft's passages
	Read       int    `json:"read"`     // of them, read so far (as the runner last reported)
	Tokens     int    `json:"tokens"`   // the passages' tokens
	ReadTokens int    `json:"read_tokens"`
}

// Prefetch states, as PrefetchStatus reports them.
const (
	ReadAheadNone    = "none"
	ReadAheadReading = "reading"
	ReadAheadReady   = "ready"
	ReadAheadStopped = "stopped"
)

// layOutDraft finds a draft's passages and lays out the main chat model's
// prompt for it, as the question would be laid out if asked now.
func (a *App) layOutDraft(ctx context.Context, draft string, ws store.Workspace, chat int64, m *models) (plan, *question, error) {
	h, err := a.history(ctx, chat)
	if err != nil {
		return plan{}, nil, err
	}
	q := a.newQuestion(draft, ws, m)
	q.history = h
	pl, err := a.quietPlan(ctx, q, forDraft)
	return pl, q, err
}

// notePrefetch records in the trace what the speculative sequence held
// for this question, before generation, and returns the outcome it
// expects (PrefetchHit until the engine says what it adopted).
func (x *ask) notePrefetch() string {
	s, ok := x.a.ahead.claim()
	t, turn, gen := x.t, x.plan.prompt.turn, x.plan.gen
	shared := 0 // passages of this turn the speculative layout holds, in order
	for shared < min(len(s.passages), len(turn)) && s.passages[shared].ChunkID == turn[shared].ChunkID {
		shared++
	}
	switch {
	case !ok:
		t.Prefetch = PrefetchNone
		return t.Prefetch
	case s.model != gen.ID():
		t.Prefetch, t.PrefetchMiss = PrefetchMiss, MissModel
	case s.base != x.q.baseKey(gen) || shared == 0 && len(turn) > 0:
		t.Prefetch, t.PrefetchMiss = PrefetchMiss, MissPassages
	default:
		t.Prefetch = PrefetchHit // confirmed by the engine's adoption
		t.PrefetchNewPassages = len(turn) - shared
		if !s.done {
			t.PrefetchMiss = MissTooLate // still reading: the question preempts it and adopts what is done
		}
	}
	t.PrefetchAgeMs = round(ms(time.Since(s.start)))
	return t.Prefetch
}

// adopted settles the prefetch outcome from what the engine reused: a
// hit when the question adopted the speculative sequence and more of its
// prompt was read while the user typed than after Enter; partial when it
// adopted it but had passages of its own left to read.
func (x *ask) adopted(st engine.Stats, expected bool) {
	t := x.t
	if !expected {
		return
	}
	if st.AdoptedSeq != engine.SeqSpeculative || st.AdoptedTokens == 0 {
		t.Prefetch, t.PrefetchNewPassages = PrefetchMiss, 0
		switch {
		case st.CachedTokens > x.a.warmTokens() && st.EvalTokens < st.PromptTokens/2:
			t.PrefetchMiss = MissCached // the answer's own sequence held the prompt already
		case t.PrefetchMiss == "":
			t.PrefetchMiss = MissEvicted
		}
		return
	}
	t.PrefetchedTokens = max(st.AdoptedTokens-x.a.warmTokens(), 0)
	t.PrefetchMiss = ""
	switch {
	case t.PrefetchedTokens == 0:
		t.Prefetch, t.PrefetchMiss = PrefetchMiss, MissTooLate
	case t.PrefetchNewPassages > 0:
		t.Prefetch = PrefetchPartial
	case t.PrefetchedTokens <= st.EvalTokens:
		// Adopted, but less was read while typing than is left after
		// Enter: a miss, and it was too late (the part read still counts
		// in the trace).
		t.Prefetch, t.PrefetchMiss = PrefetchMiss, MissTooLate
	}
}

// cutSpeculation notes that the question's prefill cuts the speculative
// sequence back to what its prompt shares (a miss: its cells would slow
// the prefill).
func (x *ask) cutSpeculation() {
	x.a.ahead.cut(x.q.baseKey(x.plan.gen), x.plan.prompt.turn)
}

// answeredWith records the layout the answer sequence holds after a
// question, and returns it.
func (x *ask) answeredWith() heldLayout {
	turn := x.plan.prompt.turn
	if c := x.plan.prompt.cut; c != nil {
		// Another question would find a passage cut for this one: what
		// the sequence holds for others ends before it.
		if i := slices.IndexFunc(turn, func(p retrieve.Passage) bool { return p.ChunkID == c.ChunkID }); i >= 0 {
			turn = turn[:i]
		}
	}
	h := heldLayout{base: x.q.baseKey(x.plan.gen), passages: turn}
	x.a.ahead.answeredWith(h)
	return h
}

// warmTokens is the length of the chat model's warm system prefix.
func (a *App) warmTokens() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.warmed.Tokens
}
