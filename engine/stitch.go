package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"lore/engine/kv"
	"lore/engine/wire"
)

// Passage KV: a passage's KV is evaluated once after a fixed prefix
// (CachePassage) and kept in the model's kv.Store; a Generate whose prompt
// holds the passage (GenerateRequest.Parts, Stitch) places it from the store
// instead of evaluating it. The result is an approximation: a stitched
// passage has not attended to the text before it in this prompt, except for
// the Repair tokens at its start, which are evaluated again in place.

// Part is a piece of a prompt; a Passage part may be stitched from saved KV.
type Part struct {
	Text    string
	Passage bool
}

// Stitch turns passage stitching on for a Generate.
type Stitch struct {
	// Prefix is the text passages were evaluated after (CachePassage's).
	Prefix string
	// Repair is how many of each passage's first tokens are evaluated
	// again in place; RepairAll evaluates every passage in full.
	Repair int
}

// RepairAll as Stitch.Repair evaluates every passage: the output is the
// same as without stitching.
const RepairAll = 1 << 30

// ErrNoKV is returned by CachePassage on a model without Options.KV.
var ErrNoKV = errors.New("model has no KV store (Options.KV)")

// CachePassage evaluates passage after prefix into the scratch sequence
// and saves its KV (without the prefix's) in the model's store, for
// Generates that stitch it. It runs at Background priority and gives way
// to interactive calls within about a millisecond (llama.cpp's abort
// callback; ErrPreempted). Unlike a Prefetch it reads in whole batches: a
// preempted passage is read again from its start anyway. A
// passage already in the store costs a lookup (Stats.Restored is set).
func (m *Model) CachePassage(ctx context.Context, prefix, passage string) (Stats, error) {
	if m.opt.KV == nil {
		return Stats{}, ErrNoKV
	}
	if m.opt.Seqs <= SeqScratch {
		return Stats{}, fmt.Errorf("cache passage: the model has no scratch sequence (Options.Seqs %d)", m.opt.Seqs)
	}
	ctx = WithPriority(ctx, Background)
	var st Stats
	hold, release, waited, err := m.queue.AcquirePreemptible(ctx)
	st.QueueMs = ms(waited)
	if err != nil {
		return st, stopped(ctx, &st, err)
	}
	defer release()
	p, err := m.runner(ctx)
	if err != nil {
		return st, err
	}
	key, want, pos, err := m.passageKey(hold, p, prefix, passage)
	if err != nil {
		return st, stopped(hold, &st, err)
	}
	if e, ok := m.opt.KV.Get(key); ok && slices.Equal(e.Tokens, want) {
		st.Restored, st.PromptTokens = true, len(want)
		return st, nil
	}
	f, err := os.CreateTemp("", "lore-passage-*.state")
	if err != nil {
		return st, err
	}
	f.Close()
	defer os.Remove(f.Name())
	var r wire.Reply
	err = p.call(hold, wire.Request{Op: "passage_kv", Seq: SeqScratch, Text: prefix, Texts: []string{passage},
		Path: f.Name()}, func(rep wire.Reply) error {
		if rep.Stats != nil {
			r = rep
		}
		return nil
	})
	if r.Stats != nil {
		q := st.QueueMs
		st = *r.Stats
		st.QueueMs = q
	}
	if err != nil || st.StopReason == "cancel" {
		if hold.Err() != nil {
			return st, stopped(hold, &st, hold.Err())
		}
		if err == nil {
			err = context.Canceled
		}
		return st, err
	}
	if !slices.Equal(r.Tokens, want) || r.Pos != pos {
		return st, fmt.Errorf("cache passage: the runner evaluated %d tokens, not the %d asked for", len(r.Tokens), len(want))
	}
	data, err := os.ReadFile(f.Name())
	if err != nil {
		return st, err
	}
	return st, m.opt.KV.Put(key, State{Tokens: want, Data: data})
}

// passageKey returns the store key of passage's KV after prefix, and the
// tokens the state holds (the prefix's, then the passage's from pos on).
func (m *Model) passageKey(ctx context.Context, p *process, prefix, passage string) (key kv.Key, toks []int, pos int, err error) {
	pre, err := m.tokens(ctx, p, prefix)
	if err != nil {
		return key, nil, 0, err
	}
	if toks, err = m.tokens(ctx, p, prefix+passage); err != nil {
		return key, nil, 0, err
	}
	if key, err = m.StateKey(toks); err != nil {
		return key, nil, 0, err
	}
	key.Context += fmt.Sprintf("; passage at %d", len(pre))
	return key, toks, len(pre), nil
}

// tokens tokenizes text as prompts are (control tokens parsed),
// remembering the answer: passages and the prefix recur.
func (m *Model) tokens(ctx context.Context, p *process, text string) ([]int, error) {
	m.mu.Lock()
	toks, ok := m.tokenCache[text]
	m.mu.Unlock()
	if ok {
		return toks, nil
	}
	err := p.call(ctx, wire.Request{Op: "tokenize", Text: text, Special: true}, func(r wire.Reply) error {
		toks = r.Tokens
		return nil
	})
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if m.tokenCache == nil || len(m.tokenCache) >= maxTokenCache {
		m.tokenCache = map[string][]int{}
	}
	m.tokenCache[text] = toks
	m.mu.Unlock()
	return toks, nil
}

// maxTokenCache bounds the remembered tokenizations.
const maxTokenCache = 4096

// segments turns a prompt's parts into the runner's segments, giving each
// passage whose KV the store holds a temporary file with its state. The
// files are the caller's to remove (the store may evict an entry while the
// runner reads it: the copy is the question's own). It returns how many
// passages had no saved KV.
func (m *Model) segments(ctx context.Context, p *process, parts []Part, s Stitch) (segs []wire.Segment, files []string, misses int, err error) {
	for _, pt := range parts {
		g := wire.Segment{Text: pt.Text}
		if pt.Passage {
			key, want, pos, err := m.passageKey(ctx, p, s.Prefix, pt.Text)
			if err != nil {
				return segs, files, misses, err
			}
			e, ok := m.opt.KV.Get(key)
			if ok && slices.Equal(e.Tokens, want) {
				f, err := os.CreateTemp("", "lore-passage-*.state")
				if err != nil {
					return segs, files, misses, err
				}
				files = append(files, f.Name())
				_, err = f.Write(e.Data)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					return segs, files, misses, err
				}
				g.Path, g.Tokens, g.Pos = f.Name(), e.Tokens, pos
			} else {
				misses++
			}
		}
		segs = append(segs, g)
	}
	return segs, files, misses, nil
}
