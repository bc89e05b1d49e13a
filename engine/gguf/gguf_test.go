package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// small builds a small valid file: a few pairs and three tensors of different types.
func small(t testing.TB) []byte {
	t.Helper()
	var w Writer
	must(t, w.AddString("general.architecture", "llama"))
	must(t, w.AddString("general.name", "small"))
	must(t, w.AddUint32("llama.block_count", 1))
	must(t, w.AddStrings("tokenizer.ggml.tokens", []string{"<unk>", "a", "b"}))
	must(t, w.AddFloat32s("tokenizer.ggml.scores", []float32{0, -1, -2}))
	must(t, w.AddTensor("norm.weight", TypeF32, []uint64{8}, make([]byte, 32)))
	must(t, w.AddTensor("w.weight", TypeQ4_0, []uint64{32, 2}, bytes.Repeat([]byte{1}, 36)))
	must(t, w.AddTensor("b.weight", TypeF16, []uint64{3}, make([]byte, 6)))
	return encode(t, &w)
}

func encode(t testing.TB, w *Writer) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func read(b []byte) (*File, error) { return Read(bytes.NewReader(b), int64(len(b))) }

func TestRoundTrip(t *testing.T) {
	kvs := []KV{
		{"u8", uint8(200)}, {"i8", int8(-5)}, {"u16", uint16(60000)}, {"i16", int16(-300)},
		{"u32", uint32(1 << 31)}, {"i32", int32(-1 << 30)}, {"f32", float32(1.5)}, {"bool", true},
		{"str", "héllo ▁world"}, {"u64", uint64(1 << 60)}, {"i64", int64(-1 << 60)}, {"f64", math.Pi},
		{"a.u8", []uint8{1, 2, 3}}, {"a.i8", []int8{-1, 2}}, {"a.u16", []uint16{9}}, {"a.i16", []int16{-9, 9}},
		{"a.u32", []uint32{7, 8}}, {"a.i32", []int32{-7}}, {"a.f32", []float32{0.25, -2}},
		{"a.bool", []bool{true, false}}, {"a.str", []string{"", "x", "<0x0A>"}}, {"a.u64", []uint64{1}},
		{"a.i64", []int64{-1}}, {"a.f64", []float64{2.5}}, {"a.empty", []int32{}},
		{"a.nested", []any{[]int32{1, 2}, []string{"p", "q"}, []any{[]float32{3}}}},
	}
	w := Writer{Alignment: 64}
	for _, kv := range kvs {
		must(t, w.Add(kv.Key, kv.Value))
	}
	q := bytes.Repeat([]byte{0xAB}, 18*4)
	must(t, w.AddTensor("q", TypeQ4_0, []uint64{64, 2}, q))
	f32 := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	must(t, w.AddTensor("f", TypeF32, []uint64{2}, f32))
	k := bytes.Repeat([]byte{7}, 144*2)
	must(t, w.AddTensorFunc("k", TypeQ4_K, []uint64{256, 1, 2}, func(out io.Writer) error {
		_, err := out.Write(k)
		return err
	}))
	b := encode(t, &w)

	f, err := read(b)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || f.Alignment != 64 || f.DataOffset%64 != 0 {
		t.Errorf("version %d alignment %d data offset %d", f.Version, f.Alignment, f.DataOffset)
	}
	want := append(kvs, KV{"general.alignment", uint32(64)})
	if !reflect.DeepEqual(f.KVs, want) {
		t.Errorf("KVs differ:\n got %#v\nwant %#v", f.KVs, want)
	}
	for _, tc := range []struct {
		name string
		typ  TensorType
		dims []uint64
		data []byte
	}{{"q", TypeQ4_0, []uint64{64, 2}, q}, {"f", TypeF32, []uint64{2}, f32}, {"k", TypeQ4_K, []uint64{256, 1, 2}, k}} {
		ti, ok := f.Tensor(tc.name)
		if !ok {
			t.Fatalf("tensor %s missing", tc.name)
		}
		if ti.Type != tc.typ || !reflect.DeepEqual(ti.Dims, tc.dims) || ti.Offset%64 != 0 {
			t.Errorf("tensor %s: %+v", tc.name, ti)
		}
		at := f.DataOffset + int64(ti.Offset)
		if got := b[at : at+int64(ti.Bytes())]; !bytes.Equal(got, tc.data) {
			t.Errorf("tensor %s data differs", tc.name)
		}
	}
	if s, _ := f.String("str"); s != "héllo ▁world" {
		t.Errorf("String = %q", s)
	}
	if u, ok := f.Uint("u16"); !ok || u != 60000 {
		t.Errorf("Uint(u16) = %d %v", u, ok)
	}
	if _, ok := f.Uint("i8"); ok {
		t.Error("Uint of a negative value succeeded")
	}
	if i, _ := f.Int("i64"); i != -1<<60 {
		t.Errorf("Int = %d", i)
	}
	if v, _ := f.Float("f64"); v != math.Pi {
		t.Errorf("Float = %v", v)
	}
	if s, _ := f.Strings("a.str"); len(s) != 3 || s[2] != "<0x0A>" {
		t.Errorf("Strings = %q", s)
	}
	if u, _ := f.Uints("a.u32"); !reflect.DeepEqual(u, []uint64{7, 8}) {
		t.Errorf("Uints = %v", u)
	}
	if _, ok := f.Uints("a.i32"); ok {
		t.Error("Uints of negative values succeeded")
	}
}

// TestPrefixes reads every prefix of a valid file: each must fail with a
// classified error (never panic) until the last tensor's data is complete.
func TestPrefixes(t *testing.T) {
	b := small(t)
	full, err := read(b)
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	for _, ti := range full.Tensors {
		end = max(end, full.DataOffset+int64(ti.Offset+ti.Bytes()))
	}
	for n := 0; n < len(b); n++ {
		_, err := read(b[:n])
		switch {
		case int64(n) >= end:
			if err != nil {
				t.Errorf("prefix %d (past all data): %v", n, err)
			}
		case n < 4:
			if !errors.Is(err, ErrNotGGUF) {
				t.Errorf("prefix %d: got %v, want ErrNotGGUF", n, err)
			}
		default:
			if !errors.Is(err, ErrTruncated) {
				t.Errorf("prefix %d: got %v, want ErrTruncated", n, err)
			}
		}
	}
}

// raw assembles hand-made headers for hostile inputs.
type raw struct{ bytes.Buffer }

func (r *raw) u32(v uint32) *raw { binary.Write(&r.Buffer, binary.LittleEndian, v); return r }
func (r *raw) u64(v uint64) *raw { binary.Write(&r.Buffer, binary.LittleEndian, v); return r }
func (r *raw) str(s string) *raw { r.u64(uint64(len(s))); r.WriteString(s); return r }
func (r *raw) pad(n int) *raw    { r.Write(make([]byte, n)); return r }

func header(version uint32, tensors, kvs uint64) *raw {
	r := &raw{}
	r.WriteString("GGUF")
	return r.u32(version).u64(tensors).u64(kvs)
}

// patchTensor overwrites a field of the named tensor's entry in an encoded file:
// "ndims", "dim0", "type" or "offset".
func patchTensor(t *testing.T, b []byte, name, field string, v uint64) []byte {
	t.Helper()
	b = bytes.Clone(b)
	var key raw
	key.str(name)
	i := bytes.Index(b, key.Bytes())
	if i < 0 {
		t.Fatalf("tensor %q not found", name)
	}
	p := i + key.Len()
	ndims := int(binary.LittleEndian.Uint32(b[p:]))
	le := binary.LittleEndian
	switch field {
	case "ndims":
		le.PutUint32(b[p:], uint32(v))
	case "dim0":
		le.PutUint64(b[p+4:], v)
	case "type":
		le.PutUint32(b[p+4+8*ndims:], uint32(v))
	case "offset":
		le.PutUint64(b[p+8+8*ndims:], v)
	default:
		t.Fatalf("unknown field %s", field)
	}
	return b
}

func TestReject(t *testing.T) {
	valid := small(t)
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00")
	kv := func(key string, typ uint32) *raw { return header(3, 0, 1).str(key).u32(typ) }
	withMeta := func(add func(w *Writer)) []byte {
		var w Writer
		add(&w)
		return encode(t, &w)
	}
	tests := []struct {
		name string
		data []byte
		want error
		msg  string // substring of the error text
	}{
		{"empty", nil, ErrNotGGUF, "too short"},
		{"text", []byte("# notes\nthis is a markdown file, not a model\n"), ErrNotGGUF, `not "GGUF"`},
		{"png", png, ErrNotGGUF, "PNG"},
		{"big-endian magic", append([]byte("FUGG"), make([]byte, 20)...), ErrUnsupported, "big-endian"},
		{"byte-swapped version", header(3<<24, 0, 0).Bytes(), ErrUnsupported, "big-endian"},
		{"version 1", header(1, 0, 0).Bytes(), ErrUnsupported, "version 1"},
		{"version 4", header(4, 0, 0).Bytes(), ErrUnsupported, "unknown GGUF version 4"},
		{"huge tensor count", header(3, 1<<40, 0).Bytes(), ErrInvalid, "tensor count"},
		{"tensor count past file", header(3, 60000, 0).Bytes(), ErrTruncated, "60000 tensor entries"},
		{"huge kv count", header(3, 0, 1<<50).Bytes(), ErrInvalid, "metadata count"},
		{"kv count past file", header(3, 0, 1000).Bytes(), ErrTruncated, "1000 metadata pairs"},
		{"huge key length", header(3, 0, 1).u64(1 << 62).pad(16).Bytes(), ErrInvalid, "metadata key 0 length"},
		{"huge string length", kv("k", 8).u64(1 << 40).pad(16).Bytes(), ErrInvalid, "exceeds limit"},
		{"string over 1 MiB", kv("k", 8).u64(MaxStringLen + 1).pad(MaxStringLen + 1).Bytes(), ErrInvalid, "exceeds limit"},
		{"string past file", kv("k", 8).u64(1000).pad(10).Bytes(), ErrTruncated, "1000 bytes"},
		{"huge array count", kv("k", 9).u32(4).u64(1 << 40).Bytes(), ErrInvalid, "exceeds limit"},
		{"array count past file", kv("k", 9).u32(8).u64(4 << 20).pad(64).Bytes(), ErrTruncated, "array of 4194304 string"},
		{"too many values", header(3, 0, 3).str("a").u32(9).u32(0).u64(4 << 20).pad(4 << 20).str("b").u32(9).u32(0).u64(4 << 20).pad(4 << 20).
			str("c").u32(9).u32(0).u64(1).pad(1).Bytes(), ErrInvalid, "more than 8388608 array elements"},
		{"too many nested", kv("k", 9).u32(9).u64(1<<20 + 1).Bytes(), ErrInvalid, "more than 8388608 array elements"},
		{"unknown value type", kv("k", 13).pad(8).Bytes(), ErrInvalid, "unknown value type 13"},
		{"unknown array type", kv("k", 9).u32(99).u64(1).Bytes(), ErrInvalid, "unknown array element type"},
		{"arrays too deep", kv("k", 9).u32(9).u64(1).u32(9).u64(1).u32(9).u64(1).u32(9).u64(1).u32(4).u64(0).Bytes(), ErrInvalid, "nested deeper"},
		{"duplicate key", header(3, 0, 2).str("k").u32(4).u32(1).str("k").u32(4).u32(2).Bytes(), ErrInvalid, "duplicate metadata key"},
		{"tensor offset past EOF", patchTensor(t, valid, "b.weight", "offset", 1<<20), ErrTruncated, "past the end"},
		{"tensor offset overflow", patchTensor(t, valid, "b.weight", "offset", math.MaxUint64-31), ErrTruncated, "past the end"},
		{"misaligned offset", patchTensor(t, valid, "b.weight", "offset", 33), ErrInvalid, "not a multiple of the alignment"},
		{"overlapping tensors", patchTensor(t, valid, "w.weight", "offset", 0), ErrInvalid, "overlap"},
		{"n_dims 5", patchTensor(t, valid, "w.weight", "ndims", 5), ErrInvalid, "5 dimensions"},
		{"zero dim", patchTensor(t, valid, "w.weight", "dim0", 0), ErrInvalid, "dimension 0 is 0"},
		{"overflowing dims", header(3, 1, 0).str("t").u32(3).u64(1 << 31).u64(1 << 31).u64(1 << 31).u32(0).u64(0).Bytes(), ErrInvalid, "too many elements"},
		{"unknown tensor type", patchTensor(t, valid, "w.weight", "type", 4), ErrInvalid, "unknown ggml type 4"},
		{"row not whole blocks", patchTensor(t, valid, "w.weight", "dim0", 16), ErrInvalid, "block size 32"},
		{"long tensor name", header(3, 1, 0).str(strings.Repeat("x", 64)).Bytes(), ErrInvalid, "length 64 exceeds limit 63"},
		{"duplicate tensor", header(3, 2, 0).str("t").u32(1).u64(8).u32(0).u64(0).str("t").u32(1).u64(8).u32(0).u64(32).pad(96).Bytes(), ErrInvalid, "duplicate tensor"},
		{"alignment 48", withMeta(func(w *Writer) { w.AddUint32("general.alignment", 48) }), ErrInvalid, "not a power of two"},
		{"alignment 0", withMeta(func(w *Writer) { w.AddUint32("general.alignment", 0) }), ErrInvalid, "not a power of two"},
		{"alignment huge", withMeta(func(w *Writer) { w.AddUint32("general.alignment", 1<<30) }), ErrInvalid, "not a power of two"},
		{"alignment not u32", withMeta(func(w *Writer) { w.Add("general.alignment", uint64(32)) }), ErrInvalid, "want uint32"},
		{"tokens not strings", withMeta(func(w *Writer) { w.AddInt32s("tokenizer.ggml.tokens", []int32{1}) }), ErrInvalid, "want an array of strings"},
		{"scores short", withMeta(func(w *Writer) {
			w.AddStrings("tokenizer.ggml.tokens", []string{"a", "b"})
			w.AddFloat32s("tokenizer.ggml.scores", []float32{0})
		}), ErrInvalid, "1 entries for 2 tokens"},
		{"token types wrong type", withMeta(func(w *Writer) {
			w.AddStrings("tokenizer.ggml.tokens", []string{"a"})
			w.Add("tokenizer.ggml.token_type", []float32{1})
		}), ErrInvalid, "want an array of int32"},
		{"duplicate tokens", withMeta(func(w *Writer) { w.AddStrings("tokenizer.ggml.tokens", []string{"a", "b", "a"}) }), ErrInvalid, `repeats "a" (ids 0 and 2)`},
		{"merges not strings", withMeta(func(w *Writer) { w.AddInt32s("tokenizer.ggml.merges", []int32{1}) }), ErrInvalid, "merges"},
		{"bad rope scaling", withMeta(func(w *Writer) {
			w.AddString("general.architecture", "llama")
			w.AddString("llama.rope.scaling.type", "wobbly")
		}), ErrInvalid, "rope.scaling.type"},
		{"too many experts", withMeta(func(w *Writer) {
			w.AddString("general.architecture", "qwen3moe")
			w.AddUint32("qwen3moe.expert_count", 1024)
		}), ErrInvalid, "expert_count 1024"},
		{"float head counts", withMeta(func(w *Writer) {
			w.AddString("general.architecture", "llama")
			w.AddFloat32s("llama.attention.head_count", []float32{4})
		}), ErrInvalid, "head_count"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := read(tc.data)
			if err == nil {
				t.Fatalf("parsed: %d KVs, %d tensors", len(f.KVs), len(f.Tensors))
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
			var ge *Error
			if !errors.As(err, &ge) {
				t.Errorf("error %T is not *Error", err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q lacks %q", err, tc.msg)
			}
		})
	}
}

// TestHostileAllocations checks that inputs claiming huge sizes are refused
// before memory is allocated for them.
func TestHostileAllocations(t *testing.T) {
	inputs := [][]byte{
		header(3, 0, 1).str("k").u32(9).u32(8).u64(4 << 20).pad(4096).Bytes(),  // 4M strings in 4 KiB
		header(3, 0, 1).str("k").u32(9).u32(12).u64(4 << 20).pad(4096).Bytes(), // 4M float64s
		header(3, 0, 1).str("k").u32(9).u32(9).u64(4 << 20).pad(4096).Bytes(),  // 4M arrays
		header(3, 0, 1).str("k").u32(8).u64(MaxStringLen).pad(4096).Bytes(),    // 1 MiB string
		header(3, MaxTensorCount, MaxKVCount).pad(4096).Bytes(),                // max counts
		header(3, 0, 1).str("k").u32(9).u32(9).u64(300).pad(300 * 12).Bytes(),  // many empty nested arrays
	}
	for i, in := range inputs {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := read(in)
		runtime.ReadMemStats(&after)
		if i < 5 && err == nil {
			t.Errorf("input %d parsed", i)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 256<<10 {
			t.Errorf("input %d (%d bytes): allocated %d bytes (err %v)", i, len(in), got, err)
		}
	}
}

func TestInfo(t *testing.T) {
	var w Writer
	must(t, w.AddString("general.architecture", "llama"))
	must(t, w.AddString("general.name", "Test Model"))
	must(t, w.AddUint32("general.file_type", 15))
	must(t, w.AddUint32("llama.context_length", 4096))
	must(t, w.AddUint32("llama.attention.sliding_window", 512))
	must(t, w.AddUint32("llama.embedding_length", 64))
	must(t, w.AddUint32("llama.block_count", 2))
	must(t, w.AddUint32("llama.feed_forward_length", 128))
	must(t, w.AddUint32("llama.attention.head_count", 4))
	must(t, w.AddInt32s("llama.attention.head_count_kv", []int32{2, 1}))
	must(t, w.AddUint32("llama.pooling_type", 1))
	must(t, w.AddString("tokenizer.chat_template", "{{ messages }}"))
	must(t, w.AddStrings("tokenizer.ggml.tokens", []string{"a", "b", "c"}))
	must(t, w.AddTensor("big", TypeQ4_0, []uint64{64, 4}, make([]byte, 18*8)))
	must(t, w.AddTensor("small", TypeF32, []uint64{64}, make([]byte, 256)))
	b := encode(t, &w)
	f, err := read(b)
	if err != nil {
		t.Fatal(err)
	}
	got := f.Info()
	want := Info{
		Architecture: "llama", Name: "Test Model", ParamCount: 320, WeightBytes: 144 + 256,
		Quantization: "Q4_K_M", ContextLength: 4096, SlidingWindow: 512, EmbeddingLength: 64, BlockCount: 2,
		FeedForwardLength: 128, HeadCount: 4, HeadCountKV: 2, KeyLength: 16, ValueLength: 16,
		VocabSize: 3, PoolingType: PoolingMean, ChatTemplate: "{{ messages }}", FileSize: int64(len(b)),
	}
	if got != want {
		t.Errorf("Info:\n got %+v\nwant %+v", got, want)
	}
	kv := uint64(2 * 1000 * 2 * (16 + 16) * 2)
	compute := uint64(4 * 512 * (3 + 4*64))
	if ram := got.EstimateRAM(1000); ram != 400+kv+compute+32<<20 {
		t.Errorf("EstimateRAM(1000) = %d, want %d", ram, 400+kv+compute+32<<20)
	}
	if got.EstimateRAM(2000) <= got.EstimateRAM(1000) {
		t.Error("EstimateRAM does not grow with context")
	}

	// Without general.file_type the tensor type holding most bytes names it.
	var w2 Writer
	must(t, w2.AddTensor("big", TypeQ8_0, []uint64{64, 4}, make([]byte, 34*8)))
	must(t, w2.AddTensor("small", TypeF32, []uint64{32}, make([]byte, 128)))
	f2, err := read(encode(t, &w2))
	if err != nil {
		t.Fatal(err)
	}
	if q := f2.Info().Quantization; q != "Q8_0" {
		t.Errorf("Quantization = %q, want Q8_0", q)
	}
	if p := f2.Info().PoolingType; p != PoolingUnspecified {
		t.Errorf("PoolingType = %v, want unspecified", p)
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	var w Writer
	must(t, w.AddString("general.architecture", "llama"))
	must(t, w.AddTensor("t", TypeF32, []uint64{4}, make([]byte, 16)))
	must(t, w.WriteFile(path))
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); f.Size != st.Size() || len(f.Tensors) != 1 {
		t.Errorf("size %d tensors %d", f.Size, len(f.Tensors))
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Open(dir) = %v", err)
	}
	if _, err := Open(filepath.Join(dir, "missing.gguf")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open(missing) = %v", err)
	}
	txt := filepath.Join(dir, "notes.txt")
	os.WriteFile(txt, []byte("hello"), 0o644)
	if _, err := Open(txt); !errors.Is(err, ErrNotGGUF) || !strings.Contains(err.Error(), txt) {
		t.Errorf("Open(text) = %v", err)
	}
	// WriteFile leaves nothing behind when a tensor callback fails.
	var bad Writer
	must(t, bad.AddTensorFunc("t", TypeF32, []uint64{4}, func(io.Writer) error {
		return errors.New("boom")
	}))
	if err := bad.WriteFile(filepath.Join(dir, "bad.gguf")); err == nil {
		t.Error("WriteFile with failing tensor succeeded")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("folder holds %d entries, want 2", len(ents))
	}
}

func TestWriterErrors(t *testing.T) {
	var w Writer
	tests := []struct {
		name string
		err  error
	}{
		{"bad value", w.Add("k", struct{}{})},
		{"bad nested", w.Add("k", []any{1})},
		{"short data", w.AddTensor("t", TypeF32, []uint64{4}, make([]byte, 15))},
		{"unknown type", w.AddTensor("t", TensorType(4), []uint64{4}, nil)},
		{"partial block", w.AddTensor("t", TypeQ4_0, []uint64{16}, make([]byte, 9))},
		{"zero dim", w.AddTensor("t", TypeF32, []uint64{0}, nil)},
		{"five dims", w.AddTensor("t", TypeF32, []uint64{1, 1, 1, 1, 1}, make([]byte, 4))},
	}
	for _, tc := range tests {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	must(t, w.AddString("k", "v"))
	if err := w.AddString("k", "v"); err == nil {
		t.Error("duplicate key accepted")
	}
	// A fill callback that writes the wrong amount is caught.
	must(t, w.AddTensorFunc("t", TypeF32, []uint64{4}, func(out io.Writer) error {
		_, err := out.Write(make([]byte, 8))
		return err
	}))
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err == nil || !strings.Contains(err.Error(), "wrote 8 bytes, want 16") {
		t.Errorf("WriteTo = %v", err)
	}
}

// TestExperts writes files with each combination of mixture-of-experts keys
// that llama.cpp's load_hparams asserts on (an abort of the whole process),
// and some that it accepts.
func TestExperts(t *testing.T) {
	type keys struct{ experts, used, groups, groupUsed int64 } // -1: key absent
	tests := []struct {
		name string
		arch string
		keys keys
		msg  string // "" when the file must be accepted
		more func(w *Writer)
	}{
		{"dense, no keys", "llama", keys{-1, -1, -1, -1}, "", nil},
		{"dense, zero counts", "llama", keys{0, 0, 0, 0}, "", nil},
		{"moe", "qwen3moe", keys{128, 8, -1, -1}, "", nil},
		{"moe, one group", "qwen3moe", keys{64, 4, 1, 0}, "", nil},
		{"moe, groups", "deepseek2", keys{256, 8, 8, 4}, "", nil},
		{"clip ignores experts", "clip", keys{8, 0, -1, -1}, "", nil},
		{"used without experts", "llama", keys{-1, 2, -1, -1}, "expert_used_count 2 exceeds expert_count 0", nil},
		{"used over experts", "qwen3moe", keys{8, 9, -1, -1}, "expert_used_count 9 exceeds expert_count 8", nil},
		{"experts, used absent", "qwen3moe", keys{8, -1, -1, -1}, "expert_used_count missing or 0", nil},
		{"experts, used 0", "qwen3moe", keys{8, 0, -1, -1}, "expert_used_count missing or 0", nil},
		{"too many experts", "qwen3moe", keys{1024, 8, -1, -1}, "expert_count 1024 exceeds", nil},
		{"groups without experts", "llama", keys{-1, -1, 4, 2}, "expert_group_count 4 without experts", nil},
		{"as many groups as experts", "deepseek2", keys{8, 2, 8, 2}, "expert_group_count 8 is not below expert_count 8", nil},
		{"experts not a multiple of groups", "deepseek2", keys{60, 4, 8, 2}, "not a multiple of expert_group_count 8", nil},
		{"groups, group used absent", "deepseek2", keys{64, 4, 8, -1}, "expert_group_used_count missing or 0", nil},
		{"group used = groups", "deepseek2", keys{64, 4, 8, 8}, "expert_group_used_count 8 is not below expert_group_count 8", nil},
		{"group used over groups", "deepseek2", keys{64, 4, 8, 9}, "expert_group_used_count 9 is not below", nil},
		{"used count of the wrong type", "qwen3moe", keys{8, -1, -1, -1}, "expert_used_count missing or 0",
			func(w *Writer) { w.AddString("qwen3moe.expert_used_count", "8") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var w Writer
			must(t, w.AddString("general.architecture", tc.arch))
			for _, kv := range []struct {
				key string
				v   int64
			}{{"expert_count", tc.keys.experts}, {"expert_used_count", tc.keys.used},
				{"expert_group_count", tc.keys.groups}, {"expert_group_used_count", tc.keys.groupUsed}} {
				if kv.v >= 0 {
					must(t, w.AddUint32(tc.arch+"."+kv.key, uint32(kv.v)))
				}
			}
			if tc.more != nil {
				tc.more(&w)
			}
			must(t, w.AddTensor("norm.weight", TypeF32, []uint64{8}, make([]byte, 32)))
			_, err := read(encode(t, &w))
			switch {
			case tc.msg == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.msg == "":
			case !errors.Is(err, ErrInvalid):
				t.Fatalf("error %v, want ErrInvalid", err)
			case !strings.Contains(err.Error(), tc.arch+".") || !strings.Contains(err.Error(), tc.msg):
				t.Errorf("error %q lacks %q", err, tc.msg)
			}
		})
	}
}
