package llamarunner

/*
#include <stdlib.h>
#include <stdatomic.h>
#include "llama.h"

// The abort flag lives in C memory because llama.cpp keeps the pointer.
static bool lore_should_abort(void * flag) {
	return atomic_load_explicit((_Atomic int *) flag, memory_order_relaxed) != 0;
}
static void * lore_abort_flag(struct llama_context * c) {
	_Atomic int * f = malloc(sizeof *f);
	if (f) {
		atomic_init(f, 0);
		llama_set_abort_callback(c, lore_should_abort, (void *) f);
	}
	return f;
}
static void lore_abort_set(void * f, int v) { atomic_store((_Atomic int *) f, v); }
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/ollama/ollama/llama"
)

// Sequence state and context options the Go binding leaves out. Like
// cContext (cgo.go) these reach the C structs the binding keeps unexported:
// llama.ContextParams is a struct whose only field is the C
// llama_context_params, so a pointer to it is a pointer to that struct.

// setUnifiedKV makes the context's KV cache one buffer shared by all
// sequences (llama_context_params.kv_unified). Split caches (the default)
// give each sequence n_ctx/n_seq_max cells and copy a whole stream on
// KvCacheSeqCp; a unified cache lets any sequence use any free cell and
// makes a copy between sequences a metadata change (the cells are shared).
func setUnifiedKV(p *llama.ContextParams) {
	(*C.struct_llama_context_params)(unsafe.Pointer(p)).kv_unified = C.bool(true)
}

// abortFlag makes a running llama_decode give up between two graph nodes
// (llama_set_abort_callback): a cancelled prefill stops within about a
// millisecond instead of at the end of its micro-batch. llama.cpp then
// drops the KV of the aborted micro-batch, and the ones before it stay.
type abortFlag struct{ f unsafe.Pointer }

func newAbortFlag(c *llama.Context) (*abortFlag, error) {
	f := C.lore_abort_flag(cContext(c))
	if f == nil {
		return nil, errors.New("abort flag: out of memory")
	}
	return &abortFlag{f}, nil
}

func (a *abortFlag) set(on bool) {
	v := C.int(0)
	if on {
		v = 1
	}
	C.lore_abort_set(a.f, v)
}

// stateGet returns the KV state of one sequence (llama_state_seq_get_data).
func stateGet(c *llama.Context, seq int) ([]byte, error) {
	lc := cContext(c)
	n := C.llama_state_seq_get_size(lc, C.llama_seq_id(seq))
	if n == 0 {
		return nil, fmt.Errorf("state of sequence %d: llama.cpp reports size 0", seq)
	}
	buf := make([]byte, int(n))
	got := C.llama_state_seq_get_data(lc, (*C.uint8_t)(unsafe.Pointer(&buf[0])), n, C.llama_seq_id(seq))
	if got != n {
		return nil, fmt.Errorf("state of sequence %d: wrote %d of %d bytes", seq, got, n)
	}
	return buf, nil
}

// stateSet replaces sequence seq's KV with a state stateGet returned. On
// failure llama.cpp has already cleared the sequence. The caller must have
// checked that data is a state this model and context produced: llama.cpp
// validates only some of it.
func stateSet(c *llama.Context, seq int, data []byte) error {
	if len(data) == 0 {
		return errors.New("empty state")
	}
	got := C.llama_state_seq_set_data(cContext(c), (*C.uint8_t)(unsafe.Pointer(&data[0])), C.size_t(len(data)), C.llama_seq_id(seq))
	if got == 0 {
		return errStateRejected
	}
	if int(got) != len(data) {
		return fmt.Errorf("state: llama.cpp read %d of %d bytes", got, len(data))
	}
	return nil
}

// errStateRejected: llama.cpp refused a state (a layout mismatch, or no free
// cells for it).
var errStateRejected = errors.New("llama.cpp rejected the state")

// seqPosRange returns the smallest and largest position held by seq (-1, -1
// when it is empty).
func seqPosRange(c *llama.Context, seq int) (lo, hi int) {
	mem := C.llama_get_memory(cContext(c))
	return int(C.llama_memory_seq_pos_min(mem, C.llama_seq_id(seq))), int(C.llama_memory_seq_pos_max(mem, C.llama_seq_id(seq)))
}
