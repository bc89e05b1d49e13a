// Package gguf reads and writes GGUF model files (the format llama.cpp loads).
//
// The reader is meant to run before a file reaches llama.cpp, which aborts the
// whole process on some malformed files. It parses the header, metadata and
// tensor table with hard limits, checks every tensor's data range against the
// file size, and never allocates from a count it has not first checked against
// the bytes left in the file. Tensor data itself is not read.
package gguf

import (
	"errors"
	"fmt"
)

// Errors returned by Read and Open wrap one of these, so callers can tell
// "not a model file at all" from "a damaged model file".
var (
	ErrNotGGUF     = errors.New("not a GGUF file")
	ErrTruncated   = errors.New("truncated GGUF file")
	ErrInvalid     = errors.New("invalid GGUF file")
	ErrUnsupported = errors.New("unsupported GGUF file")
)

// Error describes where and why a file was rejected. Its Unwrap gives one of the
// sentinel errors above.
type Error struct {
	Kind   error // ErrNotGGUF, ErrTruncated, ErrInvalid or ErrUnsupported
	Offset int64 // byte offset in the file where the problem was found; -1 if none
	Msg    string
}

func (e *Error) Error() string {
	if e.Offset < 0 {
		return fmt.Sprintf("%v: %s", e.Kind, e.Msg)
	}
	return fmt.Sprintf("%v: %s (at byte %d)", e.Kind, e.Msg, e.Offset)
}

func (e *Error) Unwrap() error { return e.Kind }

// Limits on what Read accepts. Real models stay far below them: the largest
// tokenizers hold ~260k tokens and ~500k merges, a few MiB of metadata in all.
const (
	MaxKeyLen        = 64 << 10 // bytes in a metadata key
	MaxStringLen     = 1 << 20  // bytes in one string value or array element
	MaxArrayLen      = 4 << 20  // elements in one array
	MaxValues        = 8 << 20  // array elements in the whole file; an inner array counts 8
	MaxArrayDepth    = 4        // nesting of arrays of arrays
	MaxKVCount       = 1 << 16  // metadata pairs
	MaxTensorCount   = 1 << 16  // tensors
	MaxMetadataBytes = 64 << 20 // bytes of header, metadata and tensor table together
	MaxTensorNameLen = 63       // ggml's GGML_MAX_NAME (64) less the terminating NUL
	MaxDims          = 4        // ggml's GGML_MAX_DIMS
	MaxAlignment     = 1 << 16  // largest general.alignment accepted
	DefaultAlignment = 32       // used when general.alignment is absent
)

// File is a parsed GGUF header: metadata and tensor table.
type File struct {
	Version    uint32
	Alignment  uint64
	DataOffset int64 // absolute offset of the tensor data section
	Size       int64 // file size in bytes
	KVs        []KV  // in file order
	Tensors    []TensorInfo

	index map[string]int // key -> position in KVs
}

// KV is one metadata pair. Value holds the Go type matching the GGUF type:
// uint8, int8, uint16, int16, uint32, int32, float32, bool, string, uint64,
// int64, float64; arrays are slices of those ([]int32, []string, ...), and an
// array of arrays is an []any whose elements are such slices.
type KV struct {
	Key   string
	Value any
}

// Type reports the GGUF type of the value (TypeArray for slices).
func (kv KV) Type() ValueType { t, _ := typeOf(kv.Value); return t }

// TensorInfo is one entry of the tensor table.
type TensorInfo struct {
	Name   string
	Dims   []uint64 // fastest-varying first, as in the file
	Type   TensorType
	Offset uint64 // relative to File.DataOffset
}

// Elements is the number of values in the tensor.
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Bytes is the size of the tensor's data.
func (t TensorInfo) Bytes() uint64 {
	tt := tensorTypes[t.Type]
	if tt.block == 0 {
		return 0
	}
	return t.Elements() / tt.block * tt.size
}

// Value returns the metadata pair for key.
func (f *File) Value(key string) (KV, bool) {
	i, ok := f.index[key]
	if !ok {
		return KV{}, false
	}
	return f.KVs[i], true
}

// String returns a string value.
func (f *File) String(key string) (string, bool) {
	kv, ok := f.Value(key)
	if !ok {
		return "", false
	}
	s, ok := kv.Value.(string)
	return s, ok
}

// Uint returns a non-negative integer value of any integer type (or a bool as 0/1).
func (f *File) Uint(key string) (uint64, bool) {
	kv, ok := f.Value(key)
	if !ok {
		return 0, false
	}
	return toUint(kv.Value)
}

// Int returns an integer value of any integer type that fits in an int64.
func (f *File) Int(key string) (int64, bool) {
	kv, ok := f.Value(key)
	if !ok {
		return 0, false
	}
	switch v := kv.Value.(type) {
	case int8:
		return int64(v), true
	case int16:
		return int64(v), true
	case int32:
		return int64(v), true
	case int64:
		return v, true
	}
	u, ok := toUint(kv.Value)
	if !ok || u > 1<<63-1 {
		return 0, false
	}
	return int64(u), true
}

// Float returns a float value (float32 or float64).
func (f *File) Float(key string) (float64, bool) {
	kv, ok := f.Value(key)
	if !ok {
		return 0, false
	}
	switch v := kv.Value.(type) {
	case float32:
		return float64(v), true
	case float64:
		return v, true
	}
	return 0, false
}

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, bool) {
	kv, ok := f.Value(key)
	if !ok {
		return false, false
	}
	b, ok := kv.Value.(bool)
	return b, ok
}

// Strings returns a string array. The slice is shared with the File.
func (f *File) Strings(key string) ([]string, bool) {
	kv, ok := f.Value(key)
	if !ok {
		return nil, false
	}
	s, ok := kv.Value.([]string)
	return s, ok
}

// Uints returns an array of non-negative integers of any integer type, or a
// scalar integer as a one-element slice.
func (f *File) Uints(key string) ([]uint64, bool) {
	kv, ok := f.Value(key)
	if !ok {
		return nil, false
	}
	if u, ok := toUint(kv.Value); ok {
		return []uint64{u}, true
	}
	var out []uint64
	each := func(n int, at func(int) (uint64, bool)) bool {
		out = make([]uint64, n)
		for i := range n {
			u, ok := at(i)
			if !ok {
				return false
			}
			out[i] = u
		}
		return true
	}
	switch v := kv.Value.(type) {
	case []uint8:
		ok = each(len(v), func(i int) (uint64, bool) { return uint64(v[i]), true })
	case []uint16:
		ok = each(len(v), func(i int) (uint64, bool) { return uint64(v[i]), true })
	case []uint32:
		ok = each(len(v), func(i int) (uint64, bool) { return uint64(v[i]), true })
	case []uint64:
		ok = each(len(v), func(i int) (uint64, bool) { return v[i], true })
	case []int8:
		ok = each(len(v), func(i int) (uint64, bool) { return toUint(v[i]) })
	case []int16:
		ok = each(len(v), func(i int) (uint64, bool) { return toUint(v[i]) })
	case []int32:
		ok = each(len(v), func(i int) (uint64, bool) { return toUint(v[i]) })
	case []int64:
		ok = each(len(v), func(i int) (uint64, bool) { return toUint(v[i]) })
	default:
		return nil, false
	}
	if !ok {
		return nil, false
	}
	return out, true
}

// Float32s returns a float32 array. The slice is shared with the File.
func (f *File) Float32s(key string) ([]float32, bool) {
	kv, ok := f.Value(key)
	if !ok {
		return nil, false
	}
	s, ok := kv.Value.([]float32)
	return s, ok
}

// Int32s returns an int32 array. The slice is shared with the File.
func (f *File) Int32s(key string) ([]int32, bool) {
	kv, ok := f.Value(key)
	if !ok {
		return nil, false
	}
	s, ok := kv.Value.([]int32)
	return s, ok
}

// Tensor returns the tensor called name.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return TensorInfo{}, false
}

func toUint(v any) (uint64, bool) {
	switch v := v.(type) {
	case uint8:
		return uint64(v), true
	case uint16:
		return uint64(v), true
	case uint32:
		return uint64(v), true
	case uint64:
		return v, true
	case int8:
		return uint64(v), v >= 0
	case int16:
		return uint64(v), v >= 0
	case int32:
		return uint64(v), v >= 0
	case int64:
		return uint64(v), v >= 0
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// typeOf maps a Go value to its GGUF type; for slices it also reports the element type.
func typeOf(v any) (t, elem ValueType) {
	switch v.(type) {
	case uint8:
		return TypeUint8, 0
	case int8:
		return TypeInt8, 0
	case uint16:
		return TypeUint16, 0
	case int16:
		return TypeInt16, 0
	case uint32:
		return TypeUint32, 0
	case int32:
		return TypeInt32, 0
	case float32:
		return TypeFloat32, 0
	case bool:
		return TypeBool, 0
	case string:
		return TypeString, 0
	case uint64:
		return TypeUint64, 0
	case int64:
		return TypeInt64, 0
	case float64:
		return TypeFloat64, 0
	case []uint8:
		return TypeArray, TypeUint8
	case []int8:
		return TypeArray, TypeInt8
	case []uint16:
		return TypeArray, TypeUint16
	case []int16:
		return TypeArray, TypeInt16
	case []uint32:
		return TypeArray, TypeUint32
	case []int32:
		return TypeArray, TypeInt32
	case []float32:
		return TypeArray, TypeFloat32
	case []bool:
		return TypeArray, TypeBool
	case []string:
		return TypeArray, TypeString
	case []uint64:
		return TypeArray, TypeUint64
	case []int64:
		return TypeArray, TypeInt64
	case []float64:
		return TypeArray, TypeFloat64
	case []any:
		return TypeArray, TypeArray
	}
	return ValueType(^uint32(0)), 0
}
