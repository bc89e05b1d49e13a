package llamarunner

/*
#include "llama.h"
*/
import "C"

import (
	"unsafe"

	"github.com/ollama/ollama/llama"
)

// The Go binding keeps its C handles unexported. Both llama.Model and
// llama.Context hold the C pointer as their first field, so it is read from
// there to call the few llama.cpp functions the binding leaves out. The
// binding's version is pinned in go.mod; the engine tests cover these calls.

func cModel(m *llama.Model) *C.struct_llama_model {
	return *(**C.struct_llama_model)(unsafe.Pointer(m))
}

func cContext(c *llama.Context) *C.struct_llama_context {
	return *(**C.struct_llama_context)(unsafe.Pointer(c))
}

// specialTokens returns the BOS, EOS and SEP token ids (EOS stands in for a
// missing SEP).
func specialTokens(m *llama.Model) (bos, eos, sep int) {
	v := C.llama_model_get_vocab(cModel(m))
	bos, eos, sep = int(C.llama_vocab_bos(v)), int(C.llama_vocab_eos(v)), int(C.llama_vocab_sep(v))
	if sep < 0 {
		sep = eos
	}
	return bos, eos, sep
}

// rankScore reads a reranker's score for a sequence. With rank pooling the
// pooled output holds n_cls_out floats, not n_embd, so the binding's
// GetEmbeddingsSeq would read past it.
func rankScore(c *llama.Context, seq int) (float32, bool) {
	p := C.llama_get_embeddings_seq(cContext(c), C.llama_seq_id(seq))
	if p == nil {
		return 0, false
	}
	return float32(*p), true
}

// slidingWindow is the model's attention window in tokens (0: attention
// spans the whole context). A sliding-window cache keeps only the window's
// cells of some layers, so a passage's saved cells are not the whole
// passage there.
func slidingWindow(m *llama.Model) int { return int(C.llama_model_n_swa(cModel(m))) }

// stateful reports whether the model keeps a state per sequence (recurrent
// and hybrid models): there each sequence the context is made for costs
// memory, used or not.
func stateful(m *llama.Model) bool {
	return bool(C.llama_model_is_recurrent(cModel(m))) || bool(C.llama_model_is_hybrid(cModel(m)))
}
