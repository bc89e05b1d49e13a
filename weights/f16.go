package weights

import (
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"os"

	fsggml "github.com/ollama/ollama/fs/ggml"
	"github.com/x448/float16"
)

// toF16 writes the GGUF model src to dst with every Q4_1 matrix written out
// in F16, everything else as it was. llama.cpp's fast CPU matrix kernels
// (llamafile's sgemm, the repacked layouts) have no Q4_1 path, so a Q4_1
// model reads a prompt at under half the speed of the same weights in F16
// (docs/performance.md). F16 holds each Q4_1 weight d·q+m to within f16
// rounding: the same weights, not a new quantization of the model.
func toF16(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	g, err := fsggml.Decode(in, -1)
	if err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	kv := maps.Clone(g.KV())
	kv["general.file_type"] = fsggml.FileTypeF16
	// Decode counts the parameters into the metadata; the source file does
	// not carry the count, so neither does the output.
	delete(kv, "general.parameter_count")
	var ts []*fsggml.Tensor
	for _, t := range g.Tensors().Items() {
		kind := t.Kind
		q41 := fsggml.TensorType(kind) == fsggml.TensorTypeQ4_1
		if q41 {
			kind = uint32(fsggml.TensorTypeF16)
		}
		ts = append(ts, &fsggml.Tensor{Name: t.Name, Shape: t.Shape, Kind: kind,
			WriterTo: tensorData{io.NewSectionReader(in, int64(g.Tensors().Offset+t.Offset), int64(t.Size())), t.Name, q41}})
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := fsggml.WriteGGUF(f, kv, ts); err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	return f.Close()
}

// tensorData writes one tensor of the source file, read only when written
// (a model is never held in memory whole), converted when toF16.
type tensorData struct {
	r     *io.SectionReader
	name  string
	toF16 bool
}

func (d tensorData) WriteTo(w io.Writer) (int64, error) {
	if !d.toF16 {
		return io.Copy(w, d.r)
	}
	b := make([]byte, d.r.Size())
	if _, err := io.ReadFull(d.r, b); err != nil {
		return 0, fmt.Errorf("read tensor %s: %w", d.name, err)
	}
	n, err := w.Write(q41ToF16(b))
	return int64(n), err
}

// blockQ41 is a Q4_1 block (ggml): an f16 scale d, an f16 minimum m and 32
// four-bit q, element j in the low nibble of byte j and j+16 in the high;
// each weight is d·q+m.
const blockQ41 = 4 + 16

// q41ToF16 writes Q4_1 blocks out as f16 weights, computed in float32 as
// ggml dequantizes them; the explicit conversion keeps every platform from
// fusing the multiply-add, so the output is the same bytes everywhere.
func q41ToF16(in []byte) []byte {
	n := len(in) / blockQ41
	out := make([]byte, n*32*2)
	for b := range n {
		blk, o := in[b*blockQ41:], out[b*64:]
		d := float16.Frombits(binary.LittleEndian.Uint16(blk)).Float32()
		m := float16.Frombits(binary.LittleEndian.Uint16(blk[2:])).Float32()
		for j := range 16 {
			q := blk[4+j]
			binary.LittleEndian.PutUint16(o[2*j:], float16.Fromfloat32(float32(float32(q&0x0f)*d)+m).Bits())
			binary.LittleEndian.PutUint16(o[2*(j+16):], float16.Fromfloat32(float32(float32(q>>4)*d)+m).Bits())
		}
	}
	return out
}
