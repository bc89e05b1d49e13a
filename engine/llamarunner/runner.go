// Package llamarunner is the child-process side of the engine: it owns one
// llama.cpp model and context and serves the engine's wire protocol. It runs
// in its own process because llama.cpp aborts the whole process on some
// malformed files and failed asserts; the parent survives and restarts it.
package llamarunner

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ollama/ollama/llama"
	"github.com/ollama/ollama/ml"

	"lore/engine/wire"
)

// Serve reads requests from r and writes replies to w until r is closed.
func Serve(r io.Reader, w io.Writer) error {
	s := &server{out: bufio.NewWriter(w)}
	reqs := make(chan received)
	go s.read(r, reqs)
	defer s.free()
	for rq := range reqs {
		s.begin(rq.req.ID)
		if err := s.handle(rq); err != nil {
			s.reply(wire.Reply{Error: err.Error(), Done: true})
		}
	}
	return nil
}

type received struct {
	req wire.Request
	at  time.Time
}

type server struct {
	mu  sync.Mutex // guards out
	out *bufio.Writer

	// cmu orders the start of a request against a cancel of the previous
	// one, so that a late cancel never aborts the next request's decode.
	cmu       sync.Mutex
	cur       atomic.Uint64 // id of the request being served
	cancelled atomic.Uint64 // id of the last cancelled request
	abort     *abortFlag    // set while the current request is cancelled

	p     wire.LoadParams
	model *llama.Model
	lctx  *llama.Context
	batch *llama.Batch
	// seqs holds, per sequence, the tokens whose KV sits in the context, in
	// position order.
	seqs [][]int
	// stitched holds, per sequence, where its approximate cells begin (a
	// stitched passage's, and every cell evaluated after one) and the
	// repair they were made with; from is math.MaxInt while all are exact.
	// Only a prompt stitched with the same repair reuses approximate cells.
	stitched []stitchMark
	// draft proposes speculative tokens (LoadParams.Draft); nil: prompt lookup.
	draft *drafter
	kept  *keptStates // states generate kept (Request.KeepAs)
}

type stitchMark struct{ from, repair int }

var exact = stitchMark{from: math.MaxInt}

func (s *server) read(r io.Reader, reqs chan<- received) {
	defer close(reqs)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for sc.Scan() {
		var req wire.Request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			s.reply(wire.Reply{Error: fmt.Sprintf("bad request: %v", err), Done: true})
			continue
		}
		if req.Op == "cancel" {
			s.cmu.Lock()
			s.cancelled.Store(req.ID)
			if s.abort != nil && s.cur.Load() == req.ID {
				s.abort.set(true)
			}
			s.cmu.Unlock()
			continue
		}
		reqs <- received{req, time.Now()}
	}
}

// begin makes id the current request.
func (s *server) begin(id uint64) {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	s.cur.Store(id)
	if s.abort != nil {
		s.abort.set(false)
	}
}

func (s *server) isCancelled() bool { return s.cancelled.Load() == s.cur.Load() }

func (s *server) reply(r wire.Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := json.Marshal(r)
	s.out.Write(append(b, '\n'))
	s.out.Flush()
}

func (s *server) handle(rq received) error {
	req := rq.req
	if req.Op != "load" && s.model == nil {
		return errors.New("no model loaded")
	}
	switch req.Op {
	case "load":
		return s.load(req.Load)
	case "tokenize":
		toks, err := s.model.Tokenize(req.Text, req.Special, req.Special)
		if err != nil {
			return err
		}
		s.reply(wire.Reply{Tokens: toks, Done: true})
		return nil
	case "probe":
		return s.probe(req)
	case "prefill":
		st := wire.Stats{}
		_, err := s.prefill(req, &st)
		if errors.Is(err, errCancelled) {
			st.StopReason, err = "cancel", nil
		}
		if err != nil {
			return err
		}
		s.reply(wire.Reply{Stats: &st, Done: true})
		return nil
	case "generate":
		return s.generate(req, rq.at)
	case "state_save":
		return s.stateSave(req)
	case "state_load":
		return s.stateLoad(req)
	case "passage_kv":
		return s.passageKV(req)
	case "seq_trim":
		if err := s.checkSeq(req.Seq); err != nil {
			return err
		}
		s.trimSeq(req.Seq, req.Keep)
		s.reply(wire.Reply{Done: true})
		return nil
	case "seqs":
		n := make([]int, len(s.seqs))
		for i, t := range s.seqs {
			n[i] = len(t)
		}
		s.reply(wire.Reply{SeqTokens: n, Done: true})
		return nil
	case "embed":
		return s.embed(req)
	case "rerank":
		return s.rerank(req)
	}
	return fmt.Errorf("unknown op %q", req.Op)
}

func (s *server) load(p *wire.LoadParams) error {
	if p == nil {
		return errors.New("load: no parameters")
	}
	if s.model != nil {
		return errors.New("load: a model is already loaded")
	}
	start := time.Now()
	llama.BackendInit()
	m, err := llama.LoadModelFromFile(p.Path, llama.ModelParams{UseMmap: true, NumGpuLayers: p.GPULayers})
	if err != nil {
		return fmt.Errorf("load %s: %w", p.Path, err)
	}
	fa := ml.FlashAttentionAuto
	switch p.FlashAttention {
	case "on":
		fa = ml.FlashAttentionEnabled
	case "off":
		fa = ml.FlashAttentionDisabled
	}
	seqs := max(p.Seqs, 1)
	cells := max(p.KVCells, p.NumCtx)
	// Made for more sequences than used (ctxSeqs), except where an unused
	// one costs memory: a sliding-window cache is sized per sequence, a
	// recurrent model keeps a state for each.
	made := seqs
	if slidingWindow(m) == 0 && !stateful(m) {
		made = ctxSeqs(seqs, p.Batch)
	}
	cp := llama.NewContextParams(cells, p.Batch, made, p.Threads, fa, "")
	if seqs > 1 {
		// Split caches would give each sequence cells/seqs cells and copy
		// whole streams between sequences; see setUnifiedKV.
		setUnifiedKV(&cp)
	}
	c, err := llama.NewContextWithModel(m, cp)
	if err != nil {
		llama.FreeModel(m)
		return fmt.Errorf("context for %s: %w", p.Path, err)
	}
	b, err := llama.NewBatch(p.Batch, seqs, 0)
	if err != nil {
		llama.FreeModel(m)
		return err
	}
	abort, err := newAbortFlag(c)
	if err != nil {
		llama.FreeModel(m)
		return err
	}
	if p.Draft != "" {
		dcp := llama.NewContextParams(p.NumCtx, p.Batch, 1, p.Threads, fa, "")
		// A draft that llama.cpp cannot load costs speculation its draft
		// (prompt lookup then, which the trace names), not the model.
		if s.draft, err = loadDrafter(p.Draft, m, dcp, p.Batch, p.GPULayers); err != nil {
			fmt.Fprintf(os.Stderr, "runner: %v; drafting by prompt lookup\n", err)
		}
	}
	s.cmu.Lock()
	s.abort = abort
	s.cmu.Unlock()
	s.p, s.model, s.lctx, s.batch = *p, m, c, b
	s.seqs = make([][]int, seqs)
	s.stitched = slices.Repeat([]stitchMark{exact}, seqs)
	if p.KeepBytes > 0 && slidingWindow(m) == 0 && !stateful(m) {
		// A window cache keeps too few cells, a recurrent state none per
		// position, to start another prompt with.
		s.kept = newKeptStates(p.KeepBytes)
	}
	fmt.Fprintf(os.Stderr, "runner: loaded %s in %.0f ms\n", p.Path, ms(time.Since(start)))
	s.reply(wire.Reply{Done: true})
	return nil
}

// ctxSeqs is how many sequences the context is made for: the smallest
// count from seqs to twice that which divides the micro-batch, else seqs.
// llama.cpp reserves its compute graph for a micro-batch split evenly over
// all sequences, rounding the tokens up to a multiple of their count (256
// to 258 for three); a context made for three read prompts ~10 % slower
// than one made for two or four, likely for that reason
// (docs/performance.md). In a unified cache the unused sequences hold no
// cells.
func ctxSeqs(seqs, batch int) int {
	for n := seqs; n <= 2*seqs; n++ {
		if batch%n == 0 {
			return n
		}
	}
	return seqs
}

func (s *server) free() {
	if s.batch != nil {
		s.batch.Free()
	}
	if s.model != nil {
		llama.FreeModel(s.model)
	}
	if s.draft != nil {
		s.draft.free()
	}
}

func (s *server) checkSeq(seq int) error {
	if seq < 0 || seq >= len(s.seqs) {
		return fmt.Errorf("sequence %d: the context has %d", seq, len(s.seqs))
	}
	return nil
}

// bestPrefix returns the sequence holding the longest prefix of req's toks
// that req may reuse, and its length; req.Seq wins ties, so a sequence
// prefers its own cache.
func (s *server) bestPrefix(req wire.Request, toks []int) (best, n int) {
	best, n = req.Seq, s.reusable(req, req.Seq, toks)
	for i := range s.seqs {
		if c := s.reusable(req, i, toks); c > n {
			best, n = i, c
		}
	}
	return best, n
}

// reusable is how much of toks sequence seq holds for req: stitched cells
// only serve a prompt stitched the same way, never one asked exactly.
func (s *server) reusable(req wire.Request, seq int, toks []int) int {
	c := commonPrefix(s.seqs[seq], toks)
	if m := s.stitched[seq]; len(req.Segments) == 0 || req.Repair != m.repair {
		c = min(c, m.from)
	}
	return c
}

// trimSeq keeps the first keep tokens of seq.
func (s *server) trimSeq(seq, keep int) {
	if keep <= 0 || !s.lctx.KvCacheSeqRm(seq, keep, -1) {
		s.clearSeq(seq)
	} else if keep < len(s.seqs[seq]) {
		s.seqs[seq] = s.seqs[seq][:keep]
		if keep <= s.stitched[seq].from {
			s.stitched[seq] = exact
		}
	}
}

func (s *server) clearSeq(seq int) {
	s.lctx.KvCacheSeqRm(seq, 0, -1)
	s.seqs[seq] = nil
	s.stitched[seq] = exact
}

// evict clears one sequence other than those in keep to free KV cells, and
// reports whether it did. The answer sequence (0) is never evicted for
// another: it holds the conversation a follow-up reuses. The cache has at
// least NumCtx cells, so the answer sequence alone always fits.
func (s *server) evict(keep ...int) bool {
	for v := len(s.seqs) - 1; v > 0; v-- {
		if !slices.Contains(keep, v) && len(s.seqs[v]) > 0 {
			fmt.Fprintf(os.Stderr, "runner: KV cache full: evicting sequence %d (%d tokens) for sequences %v\n", v, len(s.seqs[v]), keep)
			s.clearSeq(v)
			return true
		}
	}
	return false
}

// decode runs llama_decode, evicting other sequences while the cache is
// full. A decode aborted by a cancel (abortFlag) returns errCancelled; the
// binding reports that, llama_decode's 2, like a full cache.
func (s *server) decode(seq int, st *wire.Stats) error {
	for {
		err := s.lctx.Decode(s.batch)
		if err != nil && s.isCancelled() {
			return errCancelled
		}
		if !errors.Is(err, llama.ErrKvCacheFull) || !s.evict(seq) {
			return err
		}
		st.Evicted++
	}
}

// probe reports how much of req.Text the cache already holds.
func (s *server) probe(req wire.Request) error {
	toks, err := s.model.Tokenize(req.Text, true, true)
	if err != nil {
		return fmt.Errorf("tokenize: %w", err)
	}
	if err := s.checkSeq(req.Seq); err != nil {
		return err
	}
	best, n := s.bestPrefix(req, toks)
	st := wire.Stats{PromptTokens: len(toks), CachedTokens: n}
	if best != req.Seq {
		st.AdoptedSeq, st.AdoptedTokens = best, n
	}
	s.reply(wire.Reply{Tokens: toks, Stats: &st, Done: true})
	return nil
}

// prefill tokenises req.Text into sequence req.Seq and evaluates whatever
// of it the cache does not already hold. The longest prefix held by any
// sequence is reused: a prefix held by another sequence (a speculative
// prefill, say) is first copied into this one, which in the unified cache
// shares the cells. For generate, the logits of the last token are left
// ready for sampling. It returns the prompt's tokens; after a cancel
// (errCancelled) the sequence keeps the micro-batches already evaluated.
func (s *server) prefill(req wire.Request, st *wire.Stats) ([]int, error) {
	if err := s.checkSeq(req.Seq); err != nil {
		return nil, err
	}
	t := time.Now()
	toks, err := s.model.Tokenize(req.Text, true, true)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	st.TokenizeMs = ms(time.Since(t))
	return s.prefillTokens(req, toks, st)
}

// prefillTokens is prefill on tokens already known.
func (s *server) prefillTokens(req wire.Request, toks []int, st *wire.Stats) ([]int, error) {
	if len(toks) == 0 {
		return nil, errors.New("empty prompt")
	}
	if len(toks) >= s.p.NumCtx {
		return nil, fmt.Errorf("prompt of %d tokens does not fit the context of %d tokens", len(toks), s.p.NumCtx)
	}
	seq := req.Seq
	for _, o := range req.Trim {
		if o != seq && s.checkSeq(o) == nil {
			if c := commonPrefix(s.seqs[o], toks); c < len(s.seqs[o]) {
				s.trimSeq(o, c)
			}
		}
	}
	if req.Restore != "" {
		s.restore(req, toks, st)
	}
	best, n := s.bestPrefix(req, toks)
	if best != seq {
		s.clearSeq(seq)
		s.lctx.KvCacheSeqCp(best, seq, 0, n)
		// A copy, never an alias: appending to one sequence's tokens must
		// not write into another's.
		s.seqs[seq] = slices.Clone(s.seqs[best][:n])
		if s.stitched[best].from < n {
			s.stitched[seq] = s.stitched[best]
		}
		st.AdoptedSeq, st.AdoptedTokens = best, n
	}
	if n == len(toks) && req.Op == "generate" {
		n-- // the last token must be evaluated again to get its logits
	}
	if !s.lctx.KvCacheSeqRm(seq, n, -1) {
		// Partial removal is not supported by this cache: start the sequence over.
		s.clearSeq(seq)
		n = 0
	}
	s.seqs[seq] = s.seqs[seq][:n]
	if n <= s.stitched[seq].from {
		s.stitched[seq] = exact
	}
	st.PromptTokens, st.CachedTokens = len(toks), n
	st.AdoptedTokens = min(st.AdoptedTokens, n)
	spans := s.stitchPlan(req, toks, n, st)
	st.EvalTokens = len(toks) - n
	for _, sp := range spans {
		st.EvalTokens -= sp.to - sp.from
	}
	if req.Op == "generate" {
		plan := *st
		plan.StitchedTokens = len(toks) - n - st.EvalTokens // planned
		s.reply(wire.Reply{Plan: &plan})
	}

	step := s.p.Batch
	if req.Batch > 0 && req.Batch < step {
		step = req.Batch
	}
	t := time.Now()
	defer func() {
		st.PrefillMs = ms(time.Since(t))
		st.LlamaMs = st.PrefillMs - st.StitchMs
	}()
	// A prefill in micro-batches (a Prefetch) says how far it got after
	// each, so that a question arriving meanwhile knows what it can adopt.
	var progress func()
	if req.Op == "prefill" && req.Batch > 0 {
		var ends []int
		if len(req.Marks) > 0 {
			t := time.Now()
			var err error
			if ends, err = s.tokenEnds(req.Text, req.Marks, toks); errors.Is(err, errCancelled) {
				return nil, err
			} else if err != nil { // the reports say no marks; the prefill goes on
				fmt.Fprintf(os.Stderr, "runner: prefill marks: %v\n", err)
			}
			st.TokenizeMs += ms(time.Since(t))
		}
		progress = func() {
			p := wire.Progress{Held: len(s.seqs[seq]), Total: len(toks)}
			if ends != nil {
				marks := 0
				for marks < len(ends) && ends[marks] <= p.Held {
					marks++
				}
				p.Marks = &marks
			}
			s.reply(wire.Reply{Progress: &p})
		}
	}
	i := n
	for _, sp := range spans {
		if err := s.eval(seq, toks, i, sp.from, false, step, st, progress); err != nil {
			return nil, err
		}
		// A state llama.cpp refuses is evaluated instead.
		if s.place(seq, req.Scratch, toks, sp, st) {
			i = sp.to
			s.stitched[seq] = stitchMark{from: min(sp.from, s.stitched[seq].from), repair: req.Repair}
		}
	}
	if err := s.eval(seq, toks, i, len(toks), req.Op == "generate", step, st, progress); err != nil {
		return nil, err
	}
	st.EvalTokens = len(toks) - n - st.StitchedTokens
	return toks, nil
}

// eval evaluates toks[from:to] into seq in micro-batches of step tokens,
// asking for the last token's logits when logits is set, and calling
// progress (if set) after each. On an error st.EvalTokens says how many of
// the prompt's tokens were evaluated.
func (s *server) eval(seq int, toks []int, from, to int, logits bool, step int, st *wire.Stats, progress func()) error {
	for i := from; i < to; i += step {
		if s.isCancelled() {
			st.EvalTokens = len(s.seqs[seq]) - st.CachedTokens - st.StitchedTokens
			return errCancelled
		}
		s.batch.Clear()
		end := min(i+step, to)
		for j := i; j < end; j++ {
			s.batch.Add(toks[j], nil, j, logits && j == to-1, seq)
		}
		if err := s.decode(seq, st); err != nil {
			st.EvalTokens = len(s.seqs[seq]) - st.CachedTokens - st.StitchedTokens
			if errors.Is(err, errCancelled) {
				return err
			}
			return fmt.Errorf("prefill: %w", err)
		}
		s.seqs[seq] = append(s.seqs[seq], toks[i:end]...)
		if progress != nil {
			progress()
		}
	}
	return nil
}

// stateSave returns sequence req.Seq's KV state and tokens, inline or
// written to req.Path.
func (s *server) stateSave(req wire.Request) error {
	if err := s.checkSeq(req.Seq); err != nil {
		return err
	}
	if len(s.seqs[req.Seq]) == 0 {
		return fmt.Errorf("state_save: sequence %d is empty", req.Seq)
	}
	if s.stitched[req.Seq].from < len(s.seqs[req.Seq]) {
		// A saved state is reused as exact; stitched cells are not.
		return fmt.Errorf("state_save: sequence %d holds stitched passages", req.Seq)
	}
	t := time.Now()
	data, err := stateGet(s.lctx, req.Seq)
	if err != nil {
		return err
	}
	r := wire.Reply{Tokens: s.seqs[req.Seq], Done: true}
	if req.Path != "" {
		if err := os.WriteFile(req.Path, data, 0o600); err != nil {
			return fmt.Errorf("state_save: %w", err)
		}
	} else {
		r.State = data
	}
	r.Stats = &wire.Stats{PromptTokens: len(r.Tokens), StateBytes: len(data), SaveMs: ms(time.Since(t))}
	s.reply(r)
	return nil
}

// stateLoad replaces sequence req.Seq's KV with a saved state holding
// req.Tokens. The parent checked the bytes (engine/kv); here the state
// must also cover exactly positions 0..len(Tokens)-1, or it is dropped.
func (s *server) stateLoad(req wire.Request) error {
	if err := s.checkSeq(req.Seq); err != nil {
		return err
	}
	if len(req.Tokens) == 0 || len(req.Tokens) >= s.p.NumCtx {
		return fmt.Errorf("state_load: %d tokens for a context of %d", len(req.Tokens), s.p.NumCtx)
	}
	t := time.Now()
	data := req.State
	if req.Path != "" {
		var err error
		if data, err = os.ReadFile(req.Path); err != nil {
			return fmt.Errorf("state_load: %w", err)
		}
	}
	var st wire.Stats
	var err error
	if st.Evicted, err = s.setState(req.Seq, data, req.Tokens); err != nil {
		return fmt.Errorf("state_load: %w", err)
	}
	st.PromptTokens, st.CachedTokens, st.Restored = len(req.Tokens), len(req.Tokens), true
	st.StateBytes, st.RestoreMs = len(data), ms(time.Since(t))
	s.reply(wire.Reply{Stats: &st, Done: true})
	return nil
}

var errCancelled = errors.New("cancelled")

func (s *server) generate(req wire.Request, at time.Time) error {
	var st wire.Stats
	toks, err := s.prefill(req, &st)
	if errors.Is(err, errCancelled) {
		st.StopReason = "cancel"
		s.reply(wire.Reply{Done: true, Stats: &st})
		return nil
	}
	if err != nil {
		return err
	}
	prefillEnd := time.Now()
	// Greedy decoding skips llama.cpp's sampler chain, which costs about a
	// millisecond per token at a 32k vocabulary even when it ends in argmax.
	var sc *llama.SamplingContext
	if req.Sampling.Temperature > 0 {
		var err error
		sc, err = llama.NewSamplingContext(s.model, llama.SamplingParams{
			TopK: req.Sampling.TopK, TopP: req.Sampling.TopP, Temp: req.Sampling.Temperature,
			Seed: req.Sampling.Seed, PenaltyRepeat: 1,
		})
		if err != nil {
			return err
		}
	}
	text := NewTextStream(req.Stop)
	seq, pos := req.Seq, len(toks)
	idx := s.batch.NumTokens() - 1
	maxTokens := s.p.NumCtx - len(toks) // generation stops where the context ends
	if req.MaxTokens > 0 {
		maxTokens = min(maxTokens, req.MaxTokens)
	}
	var first time.Time
	var logits []float32
	var ids []int // sampled tokens, with Logits
	emit := func(piece string) {
		if piece == "" {
			return
		}
		if first.IsZero() {
			first = time.Now()
			st.FirstDecodeMs = ms(first.Sub(prefillEnd))
			st.TTFTMs = ms(first.Sub(at))
			st.LlamaMs += ms(first.Sub(prefillEnd)) // sampling and decodes up to here
		}
		s.reply(wire.Reply{Piece: piece})
	}
	// take counts and emits a token greedy decoding or the sampler chose,
	// and reports why generation ends with it ("" when it goes on); the
	// token that ends it is never decoded.
	take := func(tok int) string {
		st.DecodeTokens++
		if req.Logits {
			ids = append(ids, tok)
		}
		if s.model.TokenIsEog(tok) {
			return "eos"
		}
		out, stopped := text.Push(s.model.TokenToPiece(tok))
		emit(out)
		if stopped {
			return "stop"
		}
		return ""
	}
	st.StopReason = "length"
	for st.DecodeTokens < maxTokens && pos < s.p.NumCtx {
		if s.isCancelled() {
			st.StopReason = "cancel"
			break
		}
		if req.Logits && logits == nil {
			logits = slices.Clone(s.lctx.GetLogitsIth(idx))
		}
		var tok int
		if sc != nil {
			tok = sc.Sample(s.lctx, idx)
			sc.Accept(tok, false)
		} else {
			tok = argmax(s.lctx.GetLogitsIth(idx))
		}
		if why := take(tok); why != "" {
			st.StopReason = why
			break
		}
		var draft []int
		if sc == nil && req.Speculate > 0 {
			// The draft rides in tok's batch: it fits the batch, the answer's
			// token budget and the context.
			draft = s.propose(append(s.seqs[seq], tok), min(req.Speculate, s.p.Batch-1, maxTokens-st.DecodeTokens, s.p.NumCtx-pos-1), &st)
		}
		s.batch.Clear()
		s.batch.Add(tok, nil, pos, true, seq)
		for i, d := range draft {
			s.batch.Add(d, nil, pos+1+i, true, seq)
		}
		if err := s.decode(seq, &st); errors.Is(err, errCancelled) {
			st.StopReason = "cancel"
			break
		} else if err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		s.seqs[seq] = append(s.seqs[seq], tok)
		pos++
		idx = 0
		// A draft token stays while it is what greedy decoding picks after
		// the tokens before it; the first one that is not, and all after
		// it, are dropped from the cache.
		st.Drafted += len(draft)
		why := ""
		for _, d := range draft {
			if argmax(s.lctx.GetLogitsIth(idx)) != d {
				break
			}
			st.Accepted++
			if why = take(d); why != "" {
				break
			}
			s.seqs[seq] = append(s.seqs[seq], d)
			pos++
			idx++
		}
		if len(draft) > 0 {
			s.lctx.KvCacheSeqRm(seq, pos, -1) // the cells past the last token kept
		}
		if why != "" {
			st.StopReason = why
			break
		}
	}
	if st.StopReason != "stop" {
		emit(text.Flush())
	}
	st.DecodeMs = ms(time.Since(prefillEnd))
	if st.DecodeMs > 0 {
		st.DecodeTokS = float64(st.DecodeTokens) / (st.DecodeMs / 1000)
	}
	// Kept before the reply, so that it says what the runner keeps: the
	// answer's text has all been sent by now.
	st.Kept = s.keepAfter(req, st.StopReason == "cancel")
	s.reply(wire.Reply{Done: true, Stats: &st, Logits: logits, Tokens: ids})
	return nil
}

// propose drafts up to k tokens to follow h: the draft model's, else by
// prompt lookup. A failing draft model costs the step its draft, not the
// answer.
func (s *server) propose(h []int, k int, st *wire.Stats) []int {
	if s.draft == nil {
		st.SpecMode = "prompt lookup"
		return lookupDraft(h, k)
	}
	st.SpecMode = "draft model"
	d, err := s.draft.propose(h, k, s.isCancelled, st)
	if err != nil {
		fmt.Fprintf(os.Stderr, "runner: %v\n", err)
	}
	return d
}

// embed returns one L2-normalised pooled vector per text. Each text is its
// own decode: packing texts of different lengths as parallel sequences gave
// different vectors for the same text in this llama.cpp version, and chunks
// are long enough that packing would save little.
func (s *server) embed(req wire.Request) error {
	if s.p.Pooling == 0 {
		return errors.New("this model has no pooling type: it is not an embedding model")
	}
	vecs := make([][]float32, len(req.Texts))
	for i, text := range req.Texts {
		if s.isCancelled() {
			return errCancelled
		}
		toks, err := s.model.Tokenize(text, true, false)
		if err != nil {
			return fmt.Errorf("embed: tokenize: %w", err)
		}
		toks = toks[:min(len(toks), s.p.Batch)] // longer texts are truncated
		if len(toks) == 0 {
			toks = []int{0}
		}
		s.batch.Clear()
		for j, t := range toks {
			s.batch.Add(t, nil, j, true, 0)
		}
		err = s.lctx.Decode(s.batch)
		if err == nil {
			if v := s.lctx.GetEmbeddingsSeq(0); v != nil {
				vecs[i] = normalize(v)
			} else {
				err = errors.New("the model returned no pooled embedding")
			}
		}
		s.lctx.KvCacheClear()
		if err != nil {
			return fmt.Errorf("embed: %w", err)
		}
	}
	s.reply(wire.Reply{Vectors: vecs, Done: true})
	return nil
}

// rerank scores (query, document) pairs with a cross-encoder (rank pooling).
func (s *server) rerank(req wire.Request) error {
	const rankPooling = 4
	if s.p.Pooling != rankPooling {
		return errors.New("this model is not a reranker (rank pooling)")
	}
	bos, eos, sep := specialTokens(s.model)
	q, err := s.model.Tokenize(req.Query, false, false)
	if err != nil {
		return err
	}
	scores := make([]float32, len(req.Texts))
	for i, doc := range req.Texts {
		if s.isCancelled() {
			return errCancelled
		}
		d, err := s.model.Tokenize(doc, false, false)
		if err != nil {
			return err
		}
		// The layout llama.cpp's server uses: [BOS] query [EOS] [SEP] doc [EOS].
		toks := append(append(append([]int{bos}, q...), eos, sep), append(d, eos)...)
		toks = toks[:min(len(toks), s.p.Batch)]
		s.batch.Clear()
		for j, t := range toks {
			s.batch.Add(t, nil, j, true, 0)
		}
		if err := s.lctx.Decode(s.batch); err != nil {
			return fmt.Errorf("rerank: %w", err)
		}
		sc, ok := rankScore(s.lctx, 0)
		if !ok {
			return errors.New("rerank: the model returned no score")
		}
		scores[i] = sc
		s.lctx.KvCacheClear()
	}
	s.reply(wire.Reply{Scores: scores, Done: true})
	return nil
}

// lookupDraft proposes up to k tokens to follow h: what followed the
// latest earlier occurrence of h's last three (else two) tokens.
func lookupDraft(h []int, k int) []int {
	if k <= 0 {
		return nil
	}
	for n := 3; n >= 2; n-- {
		if len(h) <= n {
			continue
		}
		tail := h[len(h)-n:]
		for i := len(h) - n - 1; i >= 0; i-- {
			if slices.Equal(h[i:i+n], tail) {
				return slices.Clone(h[i+n : min(i+n+k, len(h))])
			}
		}
	}
	return nil
}

func argmax(logits []float32) int {
	best := 0
	for i, l := range logits {
		if l > logits[best] {
			best = i
		}
	}
	return best
}

func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func normalize(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return v
	}
	inv := float32(1 / math.Sqrt(sum))
	for i := range v {
		v[i] *= inv
	}
	return v
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
