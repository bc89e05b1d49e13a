// Package synth writes synthetic GGUF models that llama.cpp loads and runs:
// real architectures and tokenizers with random Q4_0 weights. Tests and
// benchmarks use them because no model can be downloaded at test time. Their
// output is gibberish; their shapes, sizes and speeds are those of real models.
package synth

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"

	"lore/engine/gguf"
)

// Options selects what Write produces.
type Options struct {
	Shape string // one of Shapes(): "tiny", "0.5b", "1b", "1.5b"
	// Embedding makes a mean-pooled embedding model (<arch>.pooling_type=1).
	// Such files use the qwen2 architecture, which has llama's tensors:
	// llama.cpp ignores pooling_type for the llama architecture.
	Embedding bool
	// Reranker makes a rank-pooled model (<arch>.pooling_type=4) shaped
	// like Qwen3-Reranker: the qwen3 architecture (llama's tensors plus
	// per-head Q/K norms), two classifier labels ("yes", "no") and a
	// cls.output head, so llama.cpp pools the pair's last token and scores
	// it as softmax(yes, no)[yes]. The score then depends on the query and
	// the document (random, but a pure function of the pair), where a
	// qwen2 file scored every pair by its first token, the same for all.
	Reranker   bool
	Seed       int64 // weights are a pure function of the seed
	Vocab      int   // tokens in the vocabulary; 0 means the shape's default
	NoTemplate bool  // omit tokenizer.chat_template
	// Width overrides the shape's hidden size (0 keeps it; else a multiple
	// of 32 and of twice the head count): an embedding model of another
	// dimension, for tests of mixed-model refusal.
	Width int
}

type shape struct {
	embd, layers, heads, kvHeads, ff, vocab, ctx int
	ropeBase                                     float32
}

// Shapes mirror real models: 0.5b and 1.5b are Qwen2.5-0.5B and -1.5B, 1b is
// Llama-3.2-1B (its 2,048-wide matrices are the ones ggml's AMX kernels
// take), all with a 32000-token SentencePiece vocabulary; tiny loads and runs
// in milliseconds.
var shapes = map[string]shape{
	"tiny": {embd: 64, layers: 2, heads: 4, kvHeads: 2, ff: 128, vocab: 4096, ctx: 4096, ropeBase: 10000},
	"0.5b": {embd: 896, layers: 24, heads: 14, kvHeads: 2, ff: 4864, vocab: 32000, ctx: 32768, ropeBase: 1e6},
	"1b":   {embd: 2048, layers: 16, heads: 32, kvHeads: 8, ff: 8192, vocab: 32000, ctx: 32768, ropeBase: 5e5},
	"1.5b": {embd: 1536, layers: 28, heads: 12, kvHeads: 2, ff: 8960, vocab: 32000, ctx: 32768, ropeBase: 1e6},
}

// Shapes lists the shape names Write accepts, smallest first.
func Shapes() []string { return []string{"tiny", "0.5b", "1b", "1.5b"} }

// ChatTemplate is the Jinja template written to tokenizer.chat_template: Qwen2's
// ChatML template, which maps to Ollama's "chatml" template.
const ChatTemplate = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}" +
	"{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}" +
	"{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}" +
	"{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"

// Write writes a synthetic model to path (through a temporary file, so a failed
// write leaves nothing behind).
func Write(path string, opt Options) error {
	w, err := build(opt)
	if err != nil {
		return err
	}
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("synth: write %s: %w", path, err)
	}
	return nil
}

// WriteTo writes a synthetic model to out.
func WriteTo(out io.Writer, opt Options) (int64, error) {
	w, err := build(opt)
	if err != nil {
		return 0, err
	}
	return w.WriteTo(out)
}

func build(opt Options) (*gguf.Writer, error) {
	sh, ok := shapes[opt.Shape]
	if !ok {
		return nil, fmt.Errorf("synth: unknown shape %q (have %v)", opt.Shape, Shapes())
	}
	if w := opt.Width; w != 0 {
		if w < 0 || w%32 != 0 || w%(2*sh.heads) != 0 || w > 8192 {
			return nil, fmt.Errorf("synth: width %d: want a multiple of 32 and of %d, at most 8192", w, 2*sh.heads)
		}
		sh.embd = w
	}
	nv := sh.vocab
	if opt.Vocab != 0 {
		nv = opt.Vocab
	}
	voc, err := buildVocab(nv)
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}

	// llama.cpp reads <arch>.pooling_type only for embedding-capable
	// architectures; qwen2 is one and takes exactly llama's tensors.
	// Rerankers are qwen3: llama.cpp pools its last token for rank
	// pooling (a qwen2 reranker pools the first, which attends to nothing
	// else) and applies the softmax of Qwen3-Reranker's yes/no head.
	arch := "llama"
	switch {
	case opt.Embedding:
		arch = "qwen2"
	case opt.Reranker:
		arch = "qwen3"
	}
	headDim := sh.embd / sh.heads
	kvDim := headDim * sh.kvHeads

	var w gguf.Writer
	add := func(key string, v any) {
		if err == nil {
			err = w.Add(key, v)
		}
	}
	kind := "chat"
	switch {
	case opt.Embedding:
		kind = "embedding"
	case opt.Reranker:
		kind = "reranker"
	}
	add("general.architecture", arch)
	add("general.name", fmt.Sprintf("lore-synth-%s-%s", opt.Shape, kind))
	add("general.description", "Synthetic model with random weights, generated by Lore for tests")
	add("general.file_type", uint32(2)) // LLAMA_FTYPE_MOSTLY_Q4_0
	add("general.quantization_version", uint32(2))
	a := arch + "."
	add(a+"context_length", uint32(sh.ctx))
	add(a+"embedding_length", uint32(sh.embd))
	add(a+"block_count", uint32(sh.layers))
	add(a+"feed_forward_length", uint32(sh.ff))
	add(a+"attention.head_count", uint32(sh.heads))
	add(a+"attention.head_count_kv", uint32(sh.kvHeads))
	add(a+"rope.dimension_count", uint32(headDim))
	add(a+"rope.freq_base", sh.ropeBase)
	add(a+"attention.layer_norm_rms_epsilon", float32(1e-6))
	add(a+"vocab_size", uint32(nv))
	switch {
	case opt.Embedding:
		add(a+"pooling_type", uint32(gguf.PoolingMean))
	case opt.Reranker:
		add(a+"pooling_type", uint32(gguf.PoolingRank))
		add(a+"classifier.output_labels", []string{"yes", "no"})
	}
	add("tokenizer.ggml.model", "llama")
	add("tokenizer.ggml.tokens", voc.tokens)
	add("tokenizer.ggml.scores", voc.scores)
	add("tokenizer.ggml.token_type", voc.types)
	add("tokenizer.ggml.unknown_token_id", uint32(unkID))
	add("tokenizer.ggml.bos_token_id", uint32(bosID))
	add("tokenizer.ggml.eos_token_id", uint32(eosID))
	add("tokenizer.ggml.add_bos_token", true)
	add("tokenizer.ggml.add_eos_token", false)
	if !opt.NoTemplate {
		add("tokenizer.chat_template", ChatTemplate)
	}
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}

	seq := uint64(0)
	q4 := func(name string, rows, cols int, silent ...int) {
		if err != nil {
			return
		}
		seq++
		rng := rand.New(rand.NewPCG(uint64(opt.Seed), seq))
		err = w.AddTensorFunc(name, gguf.TypeQ4_0, []uint64{uint64(cols), uint64(rows)}, func(out io.Writer) error {
			return writeQ4(out, rng, rows, cols, silent)
		})
	}
	ones := func(name string, n int) {
		if err != nil {
			return
		}
		b := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(1))
		}
		err = w.AddTensor(name, gguf.TypeF32, []uint64{uint64(n)}, b)
	}
	// Dims are fastest-varying first: a [cols, rows] matrix maps cols inputs to rows outputs.
	q4("token_embd.weight", nv, sh.embd)
	for i := range sh.layers {
		p := fmt.Sprintf("blk.%d.", i)
		ones(p+"attn_norm.weight", sh.embd)
		q4(p+"attn_q.weight", sh.embd, sh.embd)
		q4(p+"attn_k.weight", kvDim, sh.embd)
		q4(p+"attn_v.weight", kvDim, sh.embd)
		q4(p+"attn_output.weight", sh.embd, sh.embd)
		if arch == "qwen3" {
			ones(p+"attn_q_norm.weight", headDim)
			ones(p+"attn_k_norm.weight", headDim)
		}
		ones(p+"ffn_norm.weight", sh.embd)
		q4(p+"ffn_gate.weight", sh.ff, sh.embd)
		q4(p+"ffn_up.weight", sh.ff, sh.embd)
		q4(p+"ffn_down.weight", sh.embd, sh.ff)
	}
	ones("output_norm.weight", sh.embd)
	// A chat model never predicts a token that prints nothing: their logits
	// are 0 while the best of thousands of random logits is positive. So
	// generation runs to max tokens on any CPU (float rounding differs between
	// kernels) and every streamed token is visible text, which streaming tests
	// and decode benchmarks rely on.
	var silent []int
	if kind == "chat" {
		silent = voc.nonText()
	}
	q4("output.weight", nv, sh.embd, silent...)
	if opt.Reranker {
		// Qwen3-Reranker's head: the "yes" and "no" rows of its output
		// matrix (here random), 2 outputs of the pooled last token.
		q4("cls.output.weight", 2, sh.embd)
	}
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	return &w, nil
}

// writeQ4 streams rows*cols random Q4_0 values: blocks of 32, each an fp16
// scale then 16 bytes of 4-bit quants. The scale makes each weight's standard
// deviation about 1/sqrt(cols), so activations keep unit size through the
// layers and stay finite. Weights must also average zero: Q4_0 dequantises to
// d*(q-8), so uniform q would give every weight a mean of -d/2, which adds the
// same offset to every output and, layer after layer, collapses all hidden
// states (and embeddings) onto one direction.
//
// The rows listed in zero are all zeros (their random values are still drawn,
// so the other rows do not depend on the list).
func writeQ4(out io.Writer, rng *rand.Rand, rows, cols int, zero []int) error {
	const blockBytes = 18
	blocks := rows * cols / 32
	rowBlocks := cols / 32
	next := 0 // blocks written so far
	// q uniform in 0..15 with 0 replaced by 8: values -7..7 plus a double
	// share of 0, mean 0, std = sqrt(17.5)*d ≈ 4.18*d.
	base := 1 / (4.18 * math.Sqrt(float64(cols)))
	var scales [16]uint16 // a few nearby scales, converted once
	for i := range scales {
		scales[i] = fp16(float32(base * (0.75 + 0.5*float64(i)/15)))
	}
	buf := make([]byte, 0, 4096*blockBytes)
	for blocks > 0 {
		n := min(blocks, 4096)
		buf = buf[:n*blockBytes]
		for b := range n {
			blk := buf[b*blockBytes:]
			r1, r2 := rng.Uint64(), rng.Uint64()
			binary.LittleEndian.PutUint16(blk, scales[r1>>60])
			binary.LittleEndian.PutUint64(blk[2:], zeroMean(r1))
			binary.LittleEndian.PutUint64(blk[10:], zeroMean(r2))
			if slices.Contains(zero, (next+b)/rowBlocks) {
				clear(blk[:blockBytes]) // scale 0: every weight dequantises to 0
			}
		}
		next += n
		if _, err := out.Write(buf); err != nil {
			return err
		}
		blocks -= n
	}
	return nil
}

// zeroMean turns every zero nibble of v into 8, making the 16 quants it holds
// symmetric around 8.
func zeroMean(v uint64) uint64 {
	z := ^v
	zero := z & (z >> 1) & (z >> 2) & (z >> 3) & 0x1111111111111111
	return v | zero<<3
}

// fp16 converts a normal, positive float32 in fp16's range to IEEE half
// precision, rounding to nearest.
func fp16(f float32) uint16 {
	bits := math.Float32bits(f)
	exp := int((bits>>23)&0xff) - 127 + 15
	mant := bits & 0x7fffff
	if exp <= 0 || exp >= 31 {
		panic(fmt.Sprintf("fp16: %g out of range", f))
	}
	h := uint32(exp)<<10 | mant>>13
	if mant&0x1fff > 0x1000 || (mant&0x1fff == 0x1000 && h&1 == 1) {
		h++
	}
	return uint16(bits>>16&0x8000) | uint16(h)
}
