package synth

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"lore/engine/gguf"
)

// headReader serves the first bytes of a written file and zeros after them,
// so the header of a large model can be checked without keeping its data.
type headReader struct {
	head []byte
	size int64
}

func (h *headReader) Write(p []byte) (int, error) {
	if room := 8<<20 - len(h.head); room > 0 {
		h.head = append(h.head, p[:min(room, len(p))]...)
	}
	h.size += int64(len(p))
	return len(p), nil
}

func (h *headReader) ReadAt(p []byte, off int64) (int, error) {
	clear(p)
	if off < int64(len(h.head)) {
		copy(p, h.head[off:])
	}
	return len(p), nil
}

func TestShapes(t *testing.T) {
	tests := []struct {
		shape                              string
		embd, layers, heads, kv, ff, vocab uint64
		minMB, maxMB                       int64
	}{
		{"tiny", 64, 2, 4, 2, 128, 4096, 0, 2},
		{"0.5b", 896, 24, 14, 2, 4864, 32000, 215, 230},
		{"1b", 2048, 16, 32, 8, 8192, 32000, 580, 610},
		{"1.5b", 1536, 28, 12, 2, 8960, 32000, 740, 770},
	}
	if got := Shapes(); len(got) != len(tests) {
		t.Fatalf("Shapes() = %v", got)
	}
	for _, tc := range tests {
		t.Run(tc.shape, func(t *testing.T) {
			var h headReader
			if _, err := WriteTo(&h, Options{Shape: tc.shape, Seed: 1}); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Read(&h, h.size)
			if err != nil {
				t.Fatal(err)
			}
			in := f.Info()
			want := gguf.Info{
				Architecture: "llama", Name: "lore-synth-" + tc.shape + "-chat",
				ParamCount: in.ParamCount, WeightBytes: in.WeightBytes, Quantization: "Q4_0",
				ContextLength: in.ContextLength, EmbeddingLength: tc.embd, BlockCount: tc.layers,
				FeedForwardLength: tc.ff, HeadCount: tc.heads, HeadCountKV: tc.kv,
				KeyLength: tc.embd / tc.heads, ValueLength: tc.embd / tc.heads, VocabSize: tc.vocab,
				PoolingType: gguf.PoolingUnspecified, ChatTemplate: ChatTemplate, FileSize: h.size,
			}
			if in != want {
				t.Errorf("Info:\n got %+v\nwant %+v", in, want)
			}
			if mb := h.size >> 20; mb < tc.minMB || mb > tc.maxMB {
				t.Errorf("file is %d MiB, want %d-%d", mb, tc.minMB, tc.maxMB)
			}
			if n := len(f.Tensors); n != 3+9*int(tc.layers) {
				t.Errorf("%d tensors", n)
			}
			for name, dims := range map[string][]uint64{
				"token_embd.weight":        {tc.embd, tc.vocab},
				"output.weight":            {tc.embd, tc.vocab},
				"output_norm.weight":       {tc.embd},
				"blk.0.attn_k.weight":      {tc.embd, tc.kv * tc.embd / tc.heads},
				"blk.1.ffn_down.weight":    {tc.ff, tc.embd},
				"blk.1.ffn_gate.weight":    {tc.embd, tc.ff},
				"blk.0.attn_output.weight": {tc.embd, tc.embd},
			} {
				ti, ok := f.Tensor(name)
				if !ok || !equal(ti.Dims, dims) {
					t.Errorf("%s: %v, want %v", name, ti.Dims, dims)
				}
			}
			for key, want := range map[string]uint64{
				"llama.rope.dimension_count":      tc.embd / tc.heads,
				"general.file_type":               2,
				"tokenizer.ggml.bos_token_id":     1,
				"tokenizer.ggml.eos_token_id":     2,
				"tokenizer.ggml.unknown_token_id": 0,
			} {
				if got, _ := f.Uint(key); got != want {
					t.Errorf("%s = %d, want %d", key, got, want)
				}
			}
			if m, _ := f.String("tokenizer.ggml.model"); m != "llama" {
				t.Errorf("tokenizer model %q", m)
			}
		})
	}
}

func equal(a, b []uint64) bool { return string(fmtU(a)) == string(fmtU(b)) }

func fmtU(a []uint64) []byte {
	var b []byte
	for _, x := range a {
		b = binary.LittleEndian.AppendUint64(b, x)
	}
	return b
}

func TestOptions(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name  string
		opt   Options
		check func(t *testing.T, f *gguf.File)
	}{
		{"embedding", Options{Shape: "tiny", Embedding: true}, func(t *testing.T, f *gguf.File) {
			in := f.Info()
			if in.PoolingType != gguf.PoolingMean || in.Architecture != "qwen2" || in.BlockCount != 2 {
				t.Errorf("pooling %v arch %q blocks %d", in.PoolingType, in.Architecture, in.BlockCount)
			}
		}},
		{"no template", Options{Shape: "tiny", NoTemplate: true}, func(t *testing.T, f *gguf.File) {
			if _, ok := f.Value("tokenizer.chat_template"); ok {
				t.Error("template present")
			}
		}},
		{"vocab 1000", Options{Shape: "tiny", Vocab: 1000}, func(t *testing.T, f *gguf.File) {
			if n := f.Info().VocabSize; n != 1000 {
				t.Errorf("vocab %d", n)
			}
			if ti, _ := f.Tensor("output.weight"); ti.Dims[1] != 1000 {
				t.Errorf("output dims %v", ti.Dims)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".gguf")
			if err := Write(path, tc.opt); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, f)
		})
	}
	for _, opt := range []Options{{Shape: "7b"}, {Shape: ""}, {Shape: "tiny", Vocab: 100}} {
		if err := Write(filepath.Join(dir, "bad.gguf"), opt); err == nil {
			t.Errorf("Write(%+v) succeeded", opt)
		}
	}
}

func TestDeterministic(t *testing.T) {
	sum := func(seed int64) [32]byte {
		var b bytes.Buffer
		if _, err := WriteTo(&b, Options{Shape: "tiny", Seed: seed}); err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(b.Bytes())
	}
	a, b, c := sum(7), sum(7), sum(8)
	if a != b {
		t.Error("same seed gave different files")
	}
	if a == c {
		t.Error("different seeds gave the same file")
	}
}

func TestVocab(t *testing.T) {
	for _, n := range []int{minVocab, 4096, 32000, 50000} {
		v, err := buildVocab(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.tokens) != n || len(v.scores) != n || len(v.types) != n {
			t.Fatalf("n=%d: %d tokens %d scores %d types", n, len(v.tokens), len(v.scores), len(v.types))
		}
		seen := map[string]bool{}
		for i, tok := range v.tokens {
			if seen[tok] {
				t.Fatalf("n=%d: token %q repeated", n, tok)
			}
			seen[tok] = true
			if v.types[i] != tokNormal {
				continue
			}
			// Every normal piece must be reachable by merges: its prefixes exist.
			for j := range tok {
				if j > 0 && !seen[tok[:j]] {
					t.Fatalf("n=%d: %q lacks prefix %q", n, tok, tok[:j])
				}
			}
		}
		want := map[int]string{0: "<unk>", 1: "<s>", 2: "</s>", 3: "<0x00>", 13: "<0x0A>", 258: "<0xFF>",
			imStartID: "<|im_start|>", imEndID: "<|im_end|>"}
		for id, tok := range want {
			if v.tokens[id] != tok {
				t.Errorf("n=%d: token %d = %q, want %q", n, id, v.tokens[id], tok)
			}
		}
		if v.types[imEndID] != tokControl || v.types[13] != tokByte || v.types[0] != tokUnknown {
			t.Errorf("n=%d: wrong special token types", n)
		}
		if n >= 4096 {
			for _, w := range []string{"▁the", "▁The", "▁and", "▁question", "▁func", "▁return", "ing", "▁("} {
				if !seen[w] {
					t.Errorf("n=%d: %q missing", n, w)
				}
			}
		}
	}
}

func TestWeights(t *testing.T) {
	var b bytes.Buffer
	if _, err := WriteTo(&b, Options{Shape: "tiny", Seed: 3}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"blk.0.ffn_up.weight", "blk.1.ffn_down.weight"} {
		ti, _ := f.Tensor(name)
		data := b.Bytes()[f.DataOffset+int64(ti.Offset):][:ti.Bytes()]
		var sum, sq float64
		n := 0
		for blk := data; len(blk) >= 18; blk = blk[18:] {
			d := half(binary.LittleEndian.Uint16(blk))
			for _, q := range blk[2:18] {
				for _, nib := range []byte{q & 15, q >> 4} {
					x := d * (float64(nib) - 8)
					sum += x
					sq += x * x
					n++
				}
			}
		}
		std := math.Sqrt(sq/float64(n) - (sum/float64(n))*(sum/float64(n)))
		want := 1 / math.Sqrt(float64(ti.Dims[0]))
		if std < 0.8*want || std > 1.2*want {
			t.Errorf("%s: std %.4f, want about %.4f", name, std, want)
		}
		if mean := sum / float64(n); math.Abs(mean) > 0.02*want {
			t.Errorf("%s: mean %.5f, want about 0", name, mean)
		}
	}
	ti, _ := f.Tensor("output_norm.weight")
	norm := b.Bytes()[f.DataOffset+int64(ti.Offset):][:ti.Bytes()]
	if math.Float32frombits(binary.LittleEndian.Uint32(norm)) != 1 {
		t.Error("norm weight is not 1")
	}
}

func half(h uint16) float64 {
	exp := int(h>>10&31) - 15
	return math.Ldexp(1+float64(h&1023)/1024, exp)
}

func TestZeroMean(t *testing.T) {
	for _, c := range [][2]uint64{{0, 0x8888888888888888}, {0x0123456789ABCDEF, 0x8123456789ABCDEF},
		{0xF0F0F0F0F0F0F0F0, 0xF8F8F8F8F8F8F8F8}, {0x1000000000000001, 0x1888888888888881}} {
		if got := zeroMean(c[0]); got != c[1] {
			t.Errorf("zeroMean(%#x) = %#x, want %#x", c[0], got, c[1])
		}
	}
}

func TestFP16(t *testing.T) {
	for f, want := range map[float32]uint16{1: 0x3C00, 0.5: 0x3800, 2: 0x4000, 0.1: 0x2E66, 65504: 0x7BFF} {
		if got := fp16(f); got != want {
			t.Errorf("fp16(%g) = %#04x, want %#04x", f, got, want)
		}
	}
	for _, f := range []float32{0.0072, 0.0031, 0.027} {
		if got := half(fp16(f)); math.Abs(got-float64(f))/float64(f) > 1e-3 {
			t.Errorf("fp16(%g) decodes to %g", f, got)
		}
	}
}

func TestInflect(t *testing.T) {
	for _, c := range [][3]string{{"stop", "ed", "stopped"}, {"make", "ing", "making"}, {"try", "s", "tries"},
		{"try", "ed", "tried"}, {"play", "ed", "played"}, {"box", "s", "boxes"}, {"die", "ing", "dying"},
		{"open", "ed", "opened"}, {"run", "ing", "running"}, {"simple", "ly", "simply"}, {"easy", "ly", "easily"},
		{"answer", "ed", "answered"}, {"search", "ing", "searching"}, {"long", "er", "longer"}, {"see", "ing", "seeing"}} {
		if got := inflect(c[0], c[1]); got != c[2] {
			t.Errorf("inflect(%s, %s) = %s, want %s", c[0], c[1], got, c[2])
		}
	}
}

func TestWriteQ4ZeroRows(t *testing.T) {
	const rows, cols, rowBytes = 5, 64, 2 * 18
	gen := func(zero []int) []byte {
		var b bytes.Buffer
		if err := writeQ4(&b, rand.New(rand.NewPCG(1, 2)), rows, cols, zero); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	plain, silent := gen(nil), gen([]int{1, 4})
	for r := range rows {
		a, b := plain[r*rowBytes:(r+1)*rowBytes], silent[r*rowBytes:(r+1)*rowBytes]
		switch zero := r == 1 || r == 4; {
		case zero && !bytes.Equal(b, make([]byte, rowBytes)):
			t.Errorf("row %d is not zero: %x", r, b)
		case !zero && !bytes.Equal(a, b):
			t.Errorf("row %d changed by zeroing others", r)
		}
	}
}
