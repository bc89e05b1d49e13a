package weights

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ollama/ollama/fs"
	fsggml "github.com/ollama/ollama/fs/ggml"
	"github.com/x448/float16"
)

// TestToF16: every Q4_1 matrix is written out in F16, each weight within
// f16 rounding of d·q+m; other tensors and the metadata stay as they were,
// and the file says it is F16.
func TestToF16(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const rows, cols = 3, 64 // 6 blocks
	var q41 []byte
	var want []float32
	for range rows * cols / 32 {
		blk := make([]byte, blockQ41)
		d, m := float16.Fromfloat32(r.Float32()*0.1), float16.Fromfloat32(r.Float32()*0.4-0.2)
		binary.LittleEndian.PutUint16(blk, d.Bits())
		binary.LittleEndian.PutUint16(blk[2:], m.Bits())
		var vals [32]float32
		for j := range 16 {
			lo, hi := byte(r.IntN(16)), byte(r.IntN(16))
			blk[4+j] = lo | hi<<4
			vals[j] = float32(lo)*d.Float32() + m.Float32()
			vals[j+16] = float32(hi)*d.Float32() + m.Float32()
		}
		q41 = append(q41, blk...)
		want = append(want, vals[:]...)
	}
	norm := make([]byte, 4*cols)
	for i := range cols {
		binary.LittleEndian.PutUint32(norm[4*i:], math.Float32bits(float32(i)))
	}
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "q41.gguf"), filepath.Join(dir, "f16.gguf")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	kv := fs.Config(fsggml.KV{"general.architecture": "llama", "general.file_type": fsggml.FileType(3) /* Q4_1 */, "llama.block_count": uint32(1)})
	err = fsggml.WriteGGUF(f, kv, []*fsggml.Tensor{
		{Name: "blk.0.attn_q.weight", Kind: uint32(fsggml.TensorTypeQ4_1), Shape: []uint64{cols, rows}, WriterTo: bytes.NewReader(q41)},
		{Name: "blk.0.attn_norm.weight", Kind: uint32(fsggml.TensorTypeF32), Shape: []uint64{cols}, WriterTo: bytes.NewReader(norm)},
	})
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := toF16(src, dst); err != nil {
		t.Fatal(err)
	}

	out, err := os.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	g, err := fsggml.Decode(out, -1)
	if err != nil {
		t.Fatal(err)
	}
	if ft := g.KV().FileType(); ft != fsggml.FileTypeF16 {
		t.Errorf("file type %v, want F16", ft)
	}
	if n := g.KV().Uint("block_count"); n != 1 {
		t.Errorf("block_count %d: the metadata was not kept", n)
	}
	read := func(name string) (*fsggml.Tensor, []byte) {
		for _, ts := range g.Tensors().Items() {
			if ts.Name == name {
				b := make([]byte, ts.Size())
				if _, err := out.ReadAt(b, int64(g.Tensors().Offset+ts.Offset)); err != nil {
					t.Fatal(err)
				}
				return ts, b
			}
		}
		t.Fatalf("no tensor %s", name)
		return nil, nil
	}
	if ts, b := read("blk.0.attn_norm.weight"); ts.Kind != uint32(fsggml.TensorTypeF32) || !bytes.Equal(b, norm) {
		t.Errorf("the F32 tensor changed: kind %d", ts.Kind)
	}
	ts, b := read("blk.0.attn_q.weight")
	if ts.Kind != uint32(fsggml.TensorTypeF16) || len(b) != rows*cols*2 || ts.Shape[0] != cols || ts.Shape[1] != rows {
		t.Fatalf("matrix: kind %d, %d bytes, shape %v; want F16, %d bytes, [%d %d]", ts.Kind, len(b), ts.Shape, rows*cols*2, cols, rows)
	}
	for i, w := range want {
		got := float64(float16.Frombits(binary.LittleEndian.Uint16(b[2*i:])).Float32())
		if tol := math.Abs(float64(w))*math.Exp2(-11) + 1e-7; math.Abs(got-float64(w)) > tol {
			t.Fatalf("weight %d: %g, want %g within %g", i, got, w, tol)
		}
	}
}
