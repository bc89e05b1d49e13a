package gguf

import "fmt"

// PoolingType is how an embedding model pools token vectors (<arch>.pooling_type).
type PoolingType int

// Pooling types as numbered by llama.cpp (enum llama_pooling_type).
const (
	PoolingUnspecified PoolingType = -1 // key absent
	PoolingNone        PoolingType = 0
	PoolingMean        PoolingType = 1
	PoolingCLS         PoolingType = 2
	PoolingLast        PoolingType = 3
	PoolingRank        PoolingType = 4 // rerankers
)

func (p PoolingType) String() string {
	switch p {
	case PoolingUnspecified:
		return "unspecified"
	case PoolingNone:
		return "none"
	case PoolingMean:
		return "mean"
	case PoolingCLS:
		return "cls"
	case PoolingLast:
		return "last"
	case PoolingRank:
		return "rank"
	}
	return fmt.Sprintf("PoolingType(%d)", int(p))
}

// Info summarises a model file. Zero fields mean the file does not say.
type Info struct {
	Architecture      string
	Name              string
	ParamCount        uint64 // sum of tensor elements
	WeightBytes       uint64 // sum of tensor data sizes
	Quantization      string // general.file_type's name (e.g. "Q4_K_M"), else the tensor type holding most bytes
	ContextLength     uint64 // <arch>.context_length: the training context
	SlidingWindow     uint64 // <arch>.attention.sliding_window: some layers attend to this many tokens only (0: none)
	EmbeddingLength   uint64
	BlockCount        uint64
	FeedForwardLength uint64 // largest, if given per layer
	HeadCount         uint64 // largest, if given per layer
	HeadCountKV       uint64 // largest, if given per layer; defaults to HeadCount
	KeyLength         uint64 // per-head K size; defaults to EmbeddingLength/HeadCount
	ValueLength       uint64 // per-head V size; defaults to EmbeddingLength/HeadCount
	VocabSize         uint64 // entries in tokenizer.ggml.tokens
	PoolingType       PoolingType
	ChatTemplate      string // tokenizer.chat_template, verbatim: untrusted data, never execute it
	FileSize          int64
}

// Info extracts the commonly needed facts from the metadata.
func (f *File) Info() Info {
	in := Info{FileSize: f.Size, PoolingType: PoolingUnspecified}
	in.Architecture, _ = f.String("general.architecture")
	in.Name, _ = f.String("general.name")
	in.ChatTemplate, _ = f.String("tokenizer.chat_template")
	if tokens, ok := f.Strings("tokenizer.ggml.tokens"); ok {
		in.VocabSize = uint64(len(tokens))
	}

	byType := map[TensorType]uint64{}
	for _, t := range f.Tensors {
		in.ParamCount += t.Elements()
		in.WeightBytes += t.Bytes()
		byType[t.Type] += t.Bytes()
	}
	if ft, ok := f.Uint("general.file_type"); ok && fileTypes[ft] != "" {
		in.Quantization = fileTypes[ft]
	} else {
		var most uint64
		best := TensorType(0)
		for t, n := range byType {
			if n > most || (n == most && t < best) {
				most, best = n, t
			}
		}
		if most > 0 {
			in.Quantization = best.String()
		}
	}

	a := in.Architecture + "."
	in.ContextLength, _ = f.Uint(a + "context_length")
	in.SlidingWindow, _ = f.Uint(a + "attention.sliding_window")
	in.EmbeddingLength, _ = f.Uint(a + "embedding_length")
	in.BlockCount, _ = f.Uint(a + "block_count")
	in.FeedForwardLength = f.maxUint(a + "feed_forward_length")
	in.HeadCount = f.maxUint(a + "attention.head_count")
	in.HeadCountKV = f.maxUint(a + "attention.head_count_kv")
	if in.HeadCountKV == 0 {
		in.HeadCountKV = in.HeadCount
	}
	in.KeyLength, _ = f.Uint(a + "attention.key_length")
	in.ValueLength, _ = f.Uint(a + "attention.value_length")
	if in.HeadCount > 0 {
		if in.KeyLength == 0 {
			in.KeyLength = in.EmbeddingLength / in.HeadCount
		}
		if in.ValueLength == 0 {
			in.ValueLength = in.EmbeddingLength / in.HeadCount
		}
	}
	if p, ok := f.Int(a + "pooling_type"); ok && p >= 0 && p <= 4 {
		in.PoolingType = PoolingType(p)
	}
	return in
}

func (f *File) maxUint(key string) uint64 {
	vs, _ := f.Uints(key)
	var m uint64
	for _, v := range vs {
		m = max(m, v)
	}
	return m
}

// Allowances EstimateRAM adds to weights and KV cache.
const (
	estUbatch   = 512      // tokens per compute micro-batch: the largest Lore uses (chat models on the CPU use 256)
	estOverhead = 32 << 20 // runtime, tokenizer, output buffer and graph bookkeeping
)

// EstimateRAM estimates the memory needed to run the model on the CPU with a
// context of numCtx tokens (the training context if numCtx <= 0):
//
//	weights                                      (sum of tensor data)
//	+ KV cache = n_layer * numCtx * n_head_kv * (key_length + value_length) * 2 bytes (f16)
//	           = 2 * n_layer * numCtx * n_embd_kv * 2 when K and V heads are the same size
//	+ compute  = 4 bytes * 512 (micro-batch) * (n_vocab + 4*n_embd)
//	+ 32 MiB overhead.
//
// The compute term models llama.cpp's compute buffer, which one micro-batch's
// logits dominate. Measured with flash attention on (llama.cpp's choice on
// CPU), context 2048: n_vocab 4096/n_embd 64 used 8.1 MiB (formula 8.5),
// n_vocab 32000/n_embd 896 used 66 MiB (formula 69.5), n_vocab 32000/n_embd
// 1536 used 65.5 MiB (formula 74.5). With flash attention off, attention
// scores can need up to n_head*numCtx*512*4 bytes more.
//
// The estimate is of memory the process cannot give back. Right after loading
// a Qwen2.5-0.5B-shaped Q4_0 file (estimate 348 MiB at 2048) llama.cpp held
// 247 MiB anonymous (its repacked weights, KV cache, buffers) plus 219 MiB of
// the memory-mapped file, pages the kernel can reclaim once repacking is done.
func (in Info) EstimateRAM(numCtx int) uint64 {
	if numCtx <= 0 {
		numCtx = int(in.ContextLength)
	}
	ctx := uint64(numCtx)
	kv := in.BlockCount * ctx * in.HeadCountKV * (in.KeyLength + in.ValueLength) * 2
	compute := 4 * estUbatch * (in.VocabSize + 4*in.EmbeddingLength)
	return in.WeightBytes + kv + compute + estOverhead
}

// EstimateRAM is f.Info().EstimateRAM(numCtx).
func (f *File) EstimateRAM(numCtx int) uint64 { return f.Info().EstimateRAM(numCtx) }
