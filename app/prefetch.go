package app

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"lore/engine"
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

// Prefetch outcomes and miss reasons, as traces record them.
const (
	PrefetchHit  = "hit"
	PrefetchMiss = "miss"
	PrefetchNone = "none"

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

// speculation is what the speculative sequence holds or is reading.
type speculation struct {
	key   string // model, workspace, chat turn and passages: same key, same prompt prefix
	model string
	start time.Time
	done  bool // the prefill returned (err says whether it stopped early)
	err   error
}

// Prefetch retrieves passages for a draft question and starts reading the
// prompt up to the question into the model, in the background. Newer
// drafts supersede older ones; a draft that yields the passages already
// read (or being read) does nothing.
func (a *App) Prefetch(ctx context.Context, req PrefetchRequest) (PrefetchResult, error) {
	draft := strings.TrimSpace(req.Draft)
	switch {
	case !utf8.ValidString(draft) || len(draft) > MaxQuestion:
		return PrefetchResult{}, fmt.Errorf("%w: the draft must be valid text of at most %d bytes", ErrInvalid, MaxQuestion)
	case req.ChatID < 0:
		return PrefetchResult{}, fmt.Errorf("%w: bad chat id", ErrInvalid)
	}
	ws, err := a.lookup(ctx, req.Workspace)
	if err != nil {
		return PrefetchResult{}, err
	}
	if req.ChatID > 0 {
		if err := a.chatIn(ctx, req.ChatID, ws); err != nil {
			return PrefetchResult{}, err
		}
	}
	if err := a.limitPrefetch(req.ClientID); err != nil {
		return PrefetchResult{}, err
	}
	a.mu.Lock()
	a.drafts++
	draftNo := a.drafts // a newer draft wins even if this one's retrieval ends later
	a.mu.Unlock()
	if len(strings.Fields(draft)) < minDraftWords {
		return PrefetchResult{Reason: "draft too short"}, nil
	}
	m, let := a.hold()
	if m.chat == nil {
		let()
		return PrefetchResult{Reason: "no generation model"}, nil
	}
	if isRemote(m.chat) { // its KV cache is out of reach: nothing to read ahead into
		let()
		return PrefetchResult{Reason: "remote chat model"}, nil
	}
	ctx = engine.WithPriority(ctx, engine.Background)
	x := a.quietAsk(ctx, draft, m, ws)
	x.t.ChatID = req.ChatID
	if err := x.run(x.loadHistory, x.retrieve, x.rerank, x.assemble); err != nil {
		let()
		return PrefetchResult{}, err
	}
	if x.queuePassages() {
		// Saved passages serve whatever set the question ends with; a whole
		// draft prompt only that exact set, so the model's background time
		// goes to the passages.
		let()
		return PrefetchResult{Passages: len(x.passages), Reason: "passages queued for saved KV"}, nil
	}
	i := strings.LastIndex(x.prompt, questionMark+" "+draft)
	if i < 0 {
		let()
		return PrefetchResult{}, fmt.Errorf("prefetch: the prompt does not end with the question")
	}
	prefix := x.prompt[:i+len(questionMark)]
	res := PrefetchResult{Passages: len(x.passages)}
	key := x.specKey()
	a.mu.Lock()
	if draftNo != a.drafts {
		a.mu.Unlock()
		let()
		res.Reason = "superseded by a newer draft"
		return res, nil
	}
	if sp := a.spec; sp != nil && sp.key == key && (!sp.done || sp.err == nil) {
		a.mu.Unlock()
		let()
		res.Reason = "same passages"
		return res, nil
	}
	sp := &speculation{key: key, model: m.chat.ID(), start: time.Now()}
	a.spec = sp
	a.mu.Unlock()
	go func() {
		defer let()
		bg := context.WithoutCancel(ctx)
		// A draft for a new chat: the answer sequence's old conversation
		// would only slow this prefill (attention spans every cell in use),
		// so keep just the system prefix there.
		if t, ok := m.chat.(interface {
			TrimSeq(context.Context, int, int) error
		}); ok && len(x.history) == 0 && a.warmTokens() > 0 {
			t.TrimSeq(engine.WithPriority(bg, engine.Background), engine.SeqAnswer, a.warmTokens())
		}
		_, err := m.chat.Prefetch(bg, prefix)
		a.mu.Lock()
		// A preempted prefetch keeps what it read (the question that
		// preempted it may adopt it); its error lets the same draft resume.
		sp.done, sp.err = true, err
		a.mu.Unlock()
		if err != nil && !errors.Is(err, engine.ErrSuperseded) && !errors.Is(err, engine.ErrPreempted) {
			a.log.Warn("prefetch", "err", err)
		}
	}()
	res.Started = true
	return res, nil
}

// questionMark is where the prompt's question begins: a prefetch reads
// everything before it (see assemble).
const questionMark = "Question:"

// limitPrefetch allows one prefetch per client per prefetchInterval.
func (a *App) limitPrefetch(client string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	if last, ok := a.prefetched[client]; ok && now.Sub(last) < prefetchInterval {
		return ErrRateLimited
	}
	if len(a.prefetched) > 1024 {
		clear(a.prefetched)
	}
	a.prefetched[client] = now
	return nil
}

// specKey names what the prompt holds before the question: the model, the
// conversation so far and the passages (laid out in chunk-id order), so the
// same key means the same bytes.
func (x *ask) specKey() string {
	ids := make([]string, len(x.passages))
	for i, p := range x.passages {
		ids[i] = strconv.FormatInt(p.ChunkID, 10)
	}
	slices.Sort(ids)
	h := sha256.New()
	for _, m := range x.history {
		fmt.Fprintf(h, "%s\x00%s\x00", m.Role, m.Content)
		for _, p := range m.passages {
			fmt.Fprintf(h, "%d,", p.ChunkID)
		}
	}
	return fmt.Sprintf("%s|%d|%x|%s", x.m.chat.ID(), x.ws.ID, h.Sum(nil)[:8], strings.Join(ids, ","))
}

// notePrefetch records in the trace what the speculative sequence held
// for this question, before generation.
func (x *ask) notePrefetch() (expected bool) {
	x.a.mu.Lock()
	sp := x.a.spec
	var s speculation
	if sp != nil {
		s = *sp
	}
	x.a.mu.Unlock()
	t := x.t
	switch {
	case sp == nil:
		t.Prefetch = PrefetchNone
		return false
	case s.model != x.gen.ID():
		t.Prefetch, t.PrefetchMiss = PrefetchMiss, MissModel
	case s.key != x.specKey():
		t.Prefetch, t.PrefetchMiss = PrefetchMiss, MissPassages
	default:
		t.Prefetch = PrefetchHit // confirmed by the engine's adoption
		if !s.done {
			t.PrefetchMiss = MissTooLate // still reading: the question preempts it and adopts what is done
		}
	}
	t.PrefetchAgeMs = round(ms(time.Since(s.start)))
	return t.Prefetch == PrefetchHit
}

// adopted settles the prefetch outcome from what the engine reused: a
// hit when the question adopted the speculative sequence and more of its
// prompt was read while the user typed than after Enter.
func (x *ask) adopted(st engine.Stats, expected bool) {
	t := x.t
	if !expected {
		return
	}
	if st.AdoptedSeq != engine.SeqSpeculative || st.AdoptedTokens == 0 {
		t.Prefetch = PrefetchMiss
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
	// Adopted, but less was read while typing than is left after Enter: a
	// miss, and it was too late (the part read still counts in the trace).
	if t.PrefetchedTokens <= st.EvalTokens {
		t.Prefetch, t.PrefetchMiss = PrefetchMiss, MissTooLate
	}
}

// warmTokens is the length of the chat model's warm system prefix.
func (a *App) warmTokens() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.warmed.Tokens
}
