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
	if len(mv) != len(dv) {
		return fmt.Errorf("%w %s: %w (%d tokens, the model has %d)", ErrDraft, path, ErrVocabMismatch, len(dv), len(mv))
	}
	for i := range mv {
		if mv[i] != dv[i] {
			return fmt.Errorf("%w %s: %w (token %d is %q, the model's %q)", ErrDraft, path, ErrVocabMismatch, i, dv[i], mv[i])
		}
	}
	return nil
}
