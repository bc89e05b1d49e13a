package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// Writer builds a GGUF file: metadata pairs and tensors, written in the order
// added, with tensor data padded to the alignment. Tensor data can be given
// up front or streamed by a callback, so large files need not sit in memory.
type Writer struct {
	Version   uint32 // 3 when zero
	Alignment uint32 // DefaultAlignment when zero; any other value is also written as general.alignment

	kvs     []KV
	keys    map[string]bool
	tensors []wtensor
	names   map[string]bool
}

type wtensor struct {
	info TensorInfo
	data []byte
	fill func(io.Writer) error
}

// Add appends a metadata pair. value must be one of the Go types listed on KV.
func (w *Writer) Add(key string, value any) error {
	if err := checkValue(value, 0); err != nil {
		return fmt.Errorf("gguf: key %q: %w", key, err)
	}
	if w.keys[key] {
		return fmt.Errorf("gguf: duplicate key %q", key)
	}
	if w.keys == nil {
		w.keys = map[string]bool{}
	}
	w.keys[key] = true
	w.kvs = append(w.kvs, KV{Key: key, Value: value})
	return nil
}

func checkValue(v any, depth int) error {
	t, elem := typeOf(v)
	if !t.valid() {
		return fmt.Errorf("unsupported value type %T", v)
	}
	if elem == TypeArray {
		if depth+1 >= MaxArrayDepth {
			return fmt.Errorf("arrays nested deeper than %d", MaxArrayDepth)
		}
		for _, e := range v.([]any) {
			if et, _ := typeOf(e); et != TypeArray {
				return fmt.Errorf("array of arrays holds %T", e)
			}
			if err := checkValue(e, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// Typed shorthands for Add; the value types cannot fail, only a repeated key can.

func (w *Writer) AddString(key, v string) error        { return w.Add(key, v) }
func (w *Writer) AddUint32(key string, v uint32) error { return w.Add(key, v) }
func (w *Writer) AddInt32(key string, v int32) error   { return w.Add(key, v) }
func (w *Writer) AddFloat32(key string, v float32) error {
	return w.Add(key, v)
}
func (w *Writer) AddBool(key string, v bool) error          { return w.Add(key, v) }
func (w *Writer) AddStrings(key string, v []string) error   { return w.Add(key, v) }
func (w *Writer) AddInt32s(key string, v []int32) error     { return w.Add(key, v) }
func (w *Writer) AddFloat32s(key string, v []float32) error { return w.Add(key, v) }

// AddTensor appends a tensor whose data is in memory. dims are fastest-varying first.
func (w *Writer) AddTensor(name string, typ TensorType, dims []uint64, data []byte) error {
	t, err := w.tensor(name, typ, dims)
	if err != nil {
		return err
	}
	if uint64(len(data)) != t.info.Bytes() {
		return fmt.Errorf("gguf: tensor %q: %d bytes of data, want %d", name, len(data), t.info.Bytes())
	}
	t.data = data
	w.push(t)
	return nil
}

// AddTensorFunc appends a tensor whose data fill writes when the file is
// written; fill must write exactly the tensor's size in bytes.
func (w *Writer) AddTensorFunc(name string, typ TensorType, dims []uint64, fill func(io.Writer) error) error {
	t, err := w.tensor(name, typ, dims)
	if err != nil {
		return err
	}
	t.fill = fill
	w.push(t)
	return nil
}

func (w *Writer) push(t wtensor) {
	if w.names == nil {
		w.names = map[string]bool{}
	}
	w.names[t.info.Name] = true
	w.tensors = append(w.tensors, t)
}

func (w *Writer) tensor(name string, typ TensorType, dims []uint64) (wtensor, error) {
	if w.names[name] {
		return wtensor{}, fmt.Errorf("gguf: duplicate tensor %q", name)
	}
	if len(name) > MaxTensorNameLen {
		return wtensor{}, fmt.Errorf("gguf: tensor name %q longer than %d bytes", name, MaxTensorNameLen)
	}
	if !typ.Known() {
		return wtensor{}, fmt.Errorf("gguf: tensor %q: unknown type %d", name, typ)
	}
	if len(dims) == 0 || len(dims) > MaxDims {
		return wtensor{}, fmt.Errorf("gguf: tensor %q: %d dimensions", name, len(dims))
	}
	for _, d := range dims {
		if d == 0 {
			return wtensor{}, fmt.Errorf("gguf: tensor %q: zero dimension", name)
		}
	}
	if dims[0]%typ.BlockSize() != 0 {
		return wtensor{}, fmt.Errorf("gguf: tensor %q: row of %d is not a multiple of the %s block size %d",
			name, dims[0], typ, typ.BlockSize())
	}
	return wtensor{info: TensorInfo{Name: name, Type: typ, Dims: append([]uint64(nil), dims...)}}, nil
}

// WriteTo writes the whole file to out.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	version := w.Version
	if version == 0 {
		version = 3
	}
	align := uint64(w.Alignment)
	if align == 0 {
		align = DefaultAlignment
	}
	kvs := w.kvs
	if align != DefaultAlignment && !w.keys["general.alignment"] {
		kvs = append(kvs[:len(kvs):len(kvs)], KV{Key: "general.alignment", Value: uint32(align)})
	}

	cw := &countWriter{w: out}
	e := encoder{w: cw}
	e.bytes([]byte("GGUF"))
	e.u32(version)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(kvs)))
	for _, kv := range kvs {
		e.str(kv.Key)
		t, _ := typeOf(kv.Value)
		e.u32(uint32(t))
		e.value(kv.Value)
	}
	var off uint64
	for _, t := range w.tensors {
		e.str(t.info.Name)
		e.u32(uint32(len(t.info.Dims)))
		for _, d := range t.info.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.info.Type))
		e.u64(off)
		off += pad(t.info.Bytes(), align)
	}
	e.zeros(pad(uint64(cw.n), align) - uint64(cw.n))
	if e.err != nil {
		return cw.n, e.err
	}
	for _, t := range w.tensors {
		want := t.info.Bytes()
		start := cw.n
		if t.fill != nil {
			if err := t.fill(cw); err != nil {
				return cw.n, fmt.Errorf("gguf: tensor %q: %w", t.info.Name, err)
			}
		} else {
			e.bytes(t.data)
		}
		if e.err != nil {
			return cw.n, e.err
		}
		if got := uint64(cw.n - start); got != want {
			return cw.n, fmt.Errorf("gguf: tensor %q: wrote %d bytes, want %d", t.info.Name, got, want)
		}
		e.zeros(pad(want, align) - want)
	}
	return cw.n, e.err
}

// WriteFile writes the file to path through a temporary file in the same
// folder, so a failed write never leaves a partial model behind.
func (w *Writer) WriteFile(path string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".gguf-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if _, err = w.WriteTo(bw); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func pad(n, align uint64) uint64 { return (n + align - 1) / align * align }

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// encoder writes little-endian values and keeps the first error.
type encoder struct {
	w   io.Writer
	err error
	b   [8]byte
}

func (e *encoder) bytes(p []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(p)
	}
}

func (e *encoder) zeros(n uint64) {
	var z [64]byte
	for n > 0 {
		k := min(n, uint64(len(z)))
		e.bytes(z[:k])
		n -= k
	}
}

func (e *encoder) u8(v uint8)   { e.bytes([]byte{v}) }
func (e *encoder) u16(v uint16) { binary.LittleEndian.PutUint16(e.b[:], v); e.bytes(e.b[:2]) }
func (e *encoder) u32(v uint32) { binary.LittleEndian.PutUint32(e.b[:], v); e.bytes(e.b[:4]) }
func (e *encoder) u64(v uint64) { binary.LittleEndian.PutUint64(e.b[:], v); e.bytes(e.b[:8]) }
func (e *encoder) str(s string) { e.u64(uint64(len(s))); e.bytes([]byte(s)) }

func (e *encoder) value(v any) {
	switch v := v.(type) {
	case uint8:
		e.u8(v)
	case int8:
		e.u8(uint8(v))
	case bool:
		if v {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case uint16:
		e.u16(v)
	case int16:
		e.u16(uint16(v))
	case uint32:
		e.u32(v)
	case int32:
		e.u32(uint32(v))
	case float32:
		e.u32(math.Float32bits(v))
	case uint64:
		e.u64(v)
	case int64:
		e.u64(uint64(v))
	case float64:
		e.u64(math.Float64bits(v))
	case string:
		e.str(v)
	default:
		_, elem := typeOf(v)
		e.u32(uint32(elem))
		switch a := v.(type) {
		case []uint8:
			e.u64(uint64(len(a)))
			e.bytes(a)
		case []int8:
			encodeAll(e, a)
		case []bool:
			encodeAll(e, a)
		case []uint16:
			encodeAll(e, a)
		case []int16:
			encodeAll(e, a)
		case []uint32:
			encodeAll(e, a)
		case []int32:
			encodeAll(e, a)
		case []float32:
			encodeAll(e, a)
		case []uint64:
			encodeAll(e, a)
		case []int64:
			encodeAll(e, a)
		case []float64:
			encodeAll(e, a)
		case []string:
			encodeAll(e, a)
		case []any:
			encodeAll(e, a)
		}
	}
}

func encodeAll[T any](e *encoder, a []T) {
	e.u64(uint64(len(a)))
	for _, x := range a {
		e.value(x)
	}
}
