package gguf

import (
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkRead parses a header shaped like a Qwen2.5 model's: 151,936 tokens,
// 151,387 merges, scores, token types and 290 tensors.
func BenchmarkRead(b *testing.B) {
	const nTok, nMerge = 151936, 151387
	tokens := make([]string, nTok)
	types := make([]int32, nTok)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("tok%06d", i)
		types[i] = 1
	}
	merges := make([]string, nMerge)
	for i := range merges {
		merges[i] = fmt.Sprintf("m%d n%d", i, i)
	}
	var w Writer
	must(b, w.AddString("general.architecture", "qwen2"))
	must(b, w.AddStrings("tokenizer.ggml.tokens", tokens))
	must(b, w.AddInt32s("tokenizer.ggml.token_type", types))
	must(b, w.AddStrings("tokenizer.ggml.merges", merges))
	for i := range 290 {
		must(b, w.AddTensor(fmt.Sprintf("blk.%d.w", i), TypeQ4_0, []uint64{32}, make([]byte, 18)))
	}
	data := encode(b, &w)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := Read(bytes.NewReader(data), int64(len(data))); err != nil {
			b.Fatal(err)
		}
	}
}
