package llamarunner

import (
	"fmt"
	"time"

	"github.com/ollama/ollama/llama"

	"lore/engine/wire"
)

// drafter is a small model with the main model's vocabulary that proposes
// the tokens speculative decoding verifies. Its one sequence mirrors the
// answer's tokens, so each step evaluates only what changed since the last.
type drafter struct {
	model *llama.Model
	lctx  *llama.Context
	batch *llama.Batch
	toks  []int // the tokens its KV holds, in position order
	vocab int   // the main model's: a draft token past it ends the draft
}

func loadDrafter(path string, main *llama.Model, cp llama.ContextParams, batch, gpuLayers int) (*drafter, error) {
	m, err := llama.LoadModelFromFile(path, llama.ModelParams{UseMmap: true, NumGpuLayers: gpuLayers})
	if err != nil {
		return nil, fmt.Errorf("draft model %s: %w", path, err)
	}
	// The parent compared the token lists; this and propose guard the batch,
	// where a token id past the main model's vocabulary would crash llama.cpp.
	if d := m.NumVocab() - main.NumVocab(); d > 128 || d < -128 {
		llama.FreeModel(m)
		return nil, fmt.Errorf("draft model %s: %d tokens in its vocabulary, the model has %d", path, m.NumVocab(), main.NumVocab())
	}
	c, err := llama.NewContextWithModel(m, cp)
	if err != nil {
		llama.FreeModel(m)
		return nil, fmt.Errorf("context for draft model %s: %w", path, err)
	}
	b, err := llama.NewBatch(batch, 1, 0)
	if err != nil {
		llama.FreeModel(m)
		return nil, err
	}
	return &drafter{model: m, lctx: c, batch: b, vocab: main.NumVocab()}, nil
}

func (d *drafter) free() {
	d.batch.Free()
	llama.FreeModel(d.model)
}

// propose returns up to k tokens the draft model picks greedily after h,
// fewer when it picks an end-of-generation token or cancelled says stop.
// Reading the part of h its cache lacks beyond the last step's drafts
// counts in st (DraftReadTokens, DraftReadMs).
func (d *drafter) propose(h []int, k int, cancelled func() bool, st *wire.Stats) ([]int, error) {
	if k <= 0 || len(h) == 0 {
		return nil, nil
	}
	// Keep the common prefix; the last token of h is evaluated again if
	// the cache holds it, for its logits.
	n := min(commonPrefix(d.toks, h), len(h)-1)
	if n < len(d.toks) {
		if !d.lctx.KvCacheSeqRm(0, n, -1) {
			d.lctx.KvCacheSeqRm(0, 0, -1)
			n = 0
		}
		d.toks = d.toks[:n]
	}
	start, read := time.Now(), len(h)-n
	for from := n; from < len(h); from += d.batch.Size() {
		if cancelled() {
			return nil, nil
		}
		to := min(from+d.batch.Size(), len(h))
		d.batch.Clear()
		for i := from; i < to; i++ {
			d.batch.Add(h[i], nil, i, i == len(h)-1, 0)
		}
		if err := d.decode(); err != nil {
			return nil, err
		}
		d.toks = append(d.toks, h[from:to]...)
	}
	if read > k+1 { // more than one step's drafts and token: a catch-up read
		st.DraftReadTokens += read
		st.DraftReadMs += ms(time.Since(start))
	}
	out := make([]int, 0, k)
	idx := d.batch.NumTokens() - 1
	for {
		t := argmax(d.lctx.GetLogitsIth(idx))
		if d.model.TokenIsEog(t) || t >= d.vocab {
			return out, nil // the main model decides where the answer ends
		}
		out = append(out, t)
		if len(out) == k || cancelled() {
			return out, nil
		}
		d.batch.Clear()
		d.batch.Add(t, nil, len(d.toks), true, 0)
		if err := d.decode(); err != nil {
			return nil, err
		}
		d.toks = append(d.toks, t)
		idx = 0
	}
}

func (d *drafter) decode() error {
	if err := d.lctx.Decode(d.batch); err != nil {
		// A draft is an optimisation: start the mirror afresh next step.
		d.lctx.KvCacheSeqRm(0, 0, -1)
		d.toks = nil
		return fmt.Errorf("draft model: %w", err)
	}
	return nil
}
