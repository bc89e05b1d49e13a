package llamarunner

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"lore/engine/wire"
)

// Passage KV stitching. A passage's KV is evaluated once after a fixed
// prefix (passage_kv) and saved without the prefix's cells. A prompt that
// holds the passage elsewhere places those cells at the passage's position
// there (llama.cpp shifts the keys' RoPE rotation: KvCacheSeqAdd) instead of
// evaluating it. The passage then attends only to the prefix it was
// evaluated after, not to the text before it in this prompt; re-evaluating
// its first tokens in place (Request.Repair) restores most of what that
// costs, as EPIC measured. llama.cpp requires a sequence to grow by
// consecutive positions, so the prompt is built in order: text and repaired
// openings are evaluated, stitched passage tails copied in between.

// span is a stretch of the prompt, toks[from:to], taken from a state file
// of saved tokens starting at pos, whose first end-start are the prompt's
// toks[start:end]; repaired of the tokens before from are read in place
// (the others were cached).
type span struct {
	start, end, from, to, pos, saved, repaired int
	path                                       string
}

// stitchPlan returns the passages of req.Segments that can be placed from
// their saved states, in prompt order, after the n tokens the sequence
// already holds. Why a prompt is not stitched at all goes into
// st.StitchSkipped.
func (s *server) stitchPlan(req wire.Request, toks []int, n int, st *wire.Stats) []span {
	if len(req.Segments) == 0 || req.Op != "generate" {
		return nil
	}
	skip := func(why string) []span {
		st.StitchSkipped = why
		return nil
	}
	if req.Scratch == req.Seq || s.checkSeq(req.Scratch) != nil {
		return skip("no scratch sequence to load passages into")
	}
	if !s.lctx.KvCacheCanShift() {
		return skip("this model's KV cache cannot be shifted")
	}
	if slidingWindow(s.model) > 0 {
		return skip(errSlidingWindow.Error())
	}
	// Segments part at the last token the prompt and the text up to their
	// end agree on (tokenEnds); a passage is placed only as far as its
	// saved tokens match the prompt's, the rest is evaluated.
	var text strings.Builder
	marks := make([]int, len(req.Segments))
	for i, g := range req.Segments {
		text.WriteString(g.Text)
		marks[i] = text.Len()
	}
	ends, err := s.tokenEnds(text.String(), marks, toks)
	if err != nil {
		return skip(err.Error())
	}
	var spans []span
	at := 0
	for i, g := range req.Segments {
		start, end := at, ends[i]
		at = end
		if g.Path == "" || g.Pos <= 0 || g.Pos > len(g.Tokens) {
			continue // plain text, or a state for no tokens
		}
		// The saved passage's tokens, as far as the prompt holds them here.
		end = start + commonPrefix(g.Tokens[g.Pos:], toks[start:])
		if end <= n || end-start <= req.Repair {
			continue // cached, or evaluated in full anyway
		}
		// A cached prefix may end inside the passage (the last prompt
		// shared its first tokens): those cells are exact, so only the
		// rest is placed.
		// The prompt's last token is evaluated for the logits to sample from.
		from, to := max(start+max(req.Repair, 0), n), min(end, len(toks)-1)
		if from >= to {
			continue
		}
		spans = append(spans, span{start: start, end: end, from: from, to: to, pos: g.Pos, saved: len(g.Tokens) - g.Pos, path: g.Path,
			repaired: max(start+max(req.Repair, 0)-max(start, n), 0)})
	}
	if at != len(toks) {
		return skip("the segments do not add up to the prompt")
	}
	return spans
}

// tokenEnds says where the text up to each mark (byte offsets, in order)
// ends in toks, the text's tokens: at the last token that text[:mark]
// tokenized alone and the whole agree on. Tokenized alone, a text may
// gain a leading space (SentencePiece) or merge differently at its end
// (GPT-2's pre-tokenizer joins "\n\n" only at the end of a text), so
// an end may fall a token short of the mark, never past it.
func (s *server) tokenEnds(text string, marks []int, toks []int) ([]int, error) {
	ends := make([]int, len(marks))
	for i, mark := range marks {
		if s.isCancelled() { // a tokenization per mark: a question must not wait for them all
			return nil, errCancelled
		}
		if mark < 0 || mark > len(text) || i > 0 && mark < marks[i-1] {
			return nil, fmt.Errorf("mark %d of %d: offset %d out of order or outside the text's %d bytes", i+1, len(marks), mark, len(text))
		}
		upto, err := s.model.Tokenize(text[:mark], true, true)
		if err != nil {
			return nil, fmt.Errorf("tokenize: %w", err)
		}
		ends[i] = commonPrefix(upto, toks)
		if i > 0 && ends[i] < ends[i-1] {
			return nil, errors.New("the prompt does not tokenize apart at a passage's edge")
		}
	}
	return ends, nil
}

// errSlidingWindow refuses passage KV for a model with sliding-window
// attention (Gemma 3): its cache drops the cells that leave the window, so
// a saved passage and the prompt it is placed into would not hold what the
// layers attend to (placing them broke the sequence's positions).
var errSlidingWindow = errors.New("the model attends through a sliding window: saved passages cannot be placed")

// place copies a passage's saved KV into seq at sp's position (seq holds
// exactly toks[:sp.from]) by way of sequence sc. It reports false, leaving
// seq as it was, when the state cannot be used.
func (s *server) place(seq, sc int, toks []int, sp span, st *wire.Stats) bool {
	t := time.Now()
	defer func() { st.StitchMs += ms(time.Since(t)) }()
	fail := func(err error) bool {
		s.clearSeq(sc)
		fmt.Fprintf(os.Stderr, "runner: stitch: %v; evaluating the passage instead\n", err)
		return false
	}
	data, err := os.ReadFile(sp.path)
	if err != nil {
		return fail(err)
	}
	s.clearSeq(sc)
	for {
		err := stateSet(s.lctx, sc, data)
		if err == nil {
			break
		}
		if !errors.Is(err, errStateRejected) || !s.evict(sc, seq) {
			return fail(err)
		}
		st.Evicted++
	}
	if lo, hi := seqPosRange(s.lctx, sc); lo != sp.pos || hi != sp.pos+sp.saved-1 {
		return fail(fmt.Errorf("the state holds positions %d..%d, not %d..%d", lo, hi, sp.pos, sp.pos+sp.saved-1))
	}
	n := sp.end - sp.start
	if n < sp.saved {
		s.lctx.KvCacheSeqRm(sc, sp.pos+n, -1) // saved tokens this prompt tokenizes otherwise
	}
	k := sp.from - sp.start
	if k > 0 {
		s.lctx.KvCacheSeqRm(sc, sp.pos, sp.pos+k) // read in place, or cached already
	}
	s.lctx.KvCacheSeqAdd(sc, sp.pos+k, sp.pos+n, sp.start-sp.pos)
	s.lctx.KvCacheSeqCp(sc, seq, sp.from, sp.to)
	s.clearSeq(sc)
	s.seqs[seq] = append(s.seqs[seq], toks[sp.from:sp.to]...)
	st.StitchedPassages++
	st.StitchedTokens += sp.to - sp.from
	st.RepairedTokens += sp.repaired
	return true
}

// passageKV evaluates Texts[0] after the prefix Text in sequence Seq and
// returns the passage's KV state without the prefix's cells, then empties
// the sequence. Like a prefill it reuses any cached prefix and stops
// between micro-batches on a cancel.
func (s *server) passageKV(req wire.Request) error {
	if len(req.Texts) != 1 {
		return errors.New("passage_kv: one passage expected")
	}
	sc := req.Seq
	if err := s.checkSeq(sc); err != nil {
		return err
	}
	if sc == 0 {
		return errors.New("passage_kv: the answer sequence is not scratch space")
	}
	if slidingWindow(s.model) > 0 {
		return fmt.Errorf("passage_kv: %w", errSlidingWindow)
	}
	t := time.Now()
	prefix, err := s.model.Tokenize(req.Text, true, true)
	if err != nil {
		return fmt.Errorf("tokenize: %w", err)
	}
	all, err := s.model.Tokenize(req.Text+req.Texts[0], true, true)
	if err != nil {
		return fmt.Errorf("tokenize: %w", err)
	}
	if len(all) <= len(prefix) || !slices.Equal(all[:len(prefix)], prefix) {
		return errors.New("passage_kv: the passage does not tokenize apart from the prefix")
	}
	st := wire.Stats{TokenizeMs: ms(time.Since(t))}
	defer s.clearSeq(sc)
	if _, err := s.prefillTokens(wire.Request{Op: "prefill", Seq: sc, Batch: req.Batch}, all, &st); err != nil {
		if errors.Is(err, errCancelled) {
			st.StopReason = "cancel"
			s.reply(wire.Reply{Stats: &st, Done: true})
			return nil
		}
		return err
	}
	t = time.Now()
	// The prefix's cells stay with the sequences that share them.
	s.lctx.KvCacheSeqRm(sc, 0, len(prefix))
	data, err := stateGet(s.lctx, sc)
	if err != nil {
		return err
	}
	r := wire.Reply{Tokens: all, Pos: len(prefix), Done: true}
	if req.Path != "" {
		if err := os.WriteFile(req.Path, data, 0o600); err != nil {
			return fmt.Errorf("passage_kv: %w", err)
		}
	} else {
		r.State = data
	}
	st.StateBytes, st.SaveMs = len(data), ms(time.Since(t))
	r.Stats = &st
	s.reply(r)
	return nil
}
