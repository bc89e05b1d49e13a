package engine

import (
	"errors"
	"fmt"

	"lore/engine/gguf"
)

var (
	// ErrDraft wraps every refusal of a draft model (Options.Draft).
	ErrDraft = errors.New("draft model")
	// ErrVocabMismatch is returned for a draft model whose vocabulary is
	// not the model's: its token ids would mean other text.
	ErrVocabMismatch = errors.New("the draft model's vocabulary differs from the model's")
)

// VocabSlack is how many tokens a draft's vocabulary may have more or fewer
// than the model's, the rest being the same list: models of one family pad
// their vocabularies differently (llama.cpp's speculative server allows the
// same 128). The runner never lets a draft token past the model's.
const VocabSlack = 128

func abs(n int) int { return max(n, -n) }

// checkDraft validates the draft model's header and compares its
// tokenizer with the model's, before llama.cpp sees the file.
func checkDraft(model *gguf.File, path string) error {
	d, err := gguf.Open(path)
	if err != nil {
		return fmt.Errorf("%w %s: %w", ErrDraft, path, err)
	}
	if d.Info().PoolingType > gguf.PoolingNone {
		return fmt.Errorf("%w %s: an embedding or reranking model cannot draft text", ErrDraft, path)
	}
	mt, _ := model.String("tokenizer.ggml.model")
	dt, _ := d.String("tokenizer.ggml.model")
	if mt != dt {
		return fmt.Errorf("%w %s: %w (tokenizer %q, the model's %q)", ErrDraft, path, ErrVocabMismatch, dt, mt)
	}
	mv, _ := model.Strings("tokenizer.ggml.tokens")
	dv, _ := d.Strings("tokenizer.ggml.tokens")
	if len(mv) == 0 || abs(len(mv)-len(dv)) > VocabSlack {
		return fmt.Errorf("%w %s: %w (%d tokens, the model has %d)", ErrDraft, path, ErrVocabMismatch, len(dv), len(mv))
	}
	for i := range min(len(mv), len(dv)) {
		if mv[i] != dv[i] {
			return fmt.Errorf("%w %s: %w (token %d is %q, the model's %q)", ErrDraft, path, ErrVocabMismatch, i, dv[i], mv[i])
		}
	}
	return nil
}
