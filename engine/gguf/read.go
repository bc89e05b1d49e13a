package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"slices"
	"unsafe"
)

// Open parses the GGUF header of the file at path.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf %s: not a regular file", path)
	}
	f, err := Read(fh, st.Size())
	if err != nil {
		return nil, fmt.Errorf("gguf %s: %w", path, err)
	}
	return f, nil
}

// Read parses a GGUF header from r, whose total size is size. Besides the format
// itself it rejects files that parse but make llama.cpp abort (see checkLlama).
func Read(r io.ReaderAt, size int64) (*File, error) {
	if size < 0 {
		return nil, fmt.Errorf("gguf: negative size %d", size)
	}
	p := &parser{r: r, size: size, limit: min(size, MaxMetadataBytes), buf: make([]byte, 64<<10)}
	f, err := p.file()
	if err != nil {
		return nil, err
	}
	if err := checkLlama(f); err != nil {
		return nil, err
	}
	return f, nil
}

type parser struct {
	r      io.ReaderAt
	size   int64 // file size
	limit  int64 // header bytes may not extend past this offset
	off    int64 // next byte to read
	buf    []byte
	bufOff int64 // file offset of buf[0]
	bufN   int   // valid bytes in buf
	tmp    [8]byte
	values int // array elements read so far, toward MaxValues
}

func (p *parser) fail(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Offset: p.off, Msg: fmt.Sprintf(format, args...)}
}

// room checks that n more header bytes are available, before anything is
// allocated for them.
func (p *parser) room(n uint64, what string) error {
	if left := uint64(p.size - p.off); n > left {
		return p.fail(ErrTruncated, "%s needs %d bytes but only %d remain", what, n, left)
	}
	if n > uint64(p.limit-p.off) {
		return p.fail(ErrInvalid, "%s: header and metadata exceed %d bytes", what, MaxMetadataBytes)
	}
	return nil
}

// read fills b from the current offset; the caller has checked room.
func (p *parser) read(b []byte) error {
	for len(b) > 0 {
		if p.off >= p.bufOff && p.off < p.bufOff+int64(p.bufN) {
			n := copy(b, p.buf[p.off-p.bufOff:p.bufN])
			b = b[n:]
			p.off += int64(n)
			continue
		}
		if len(b) >= len(p.buf) {
			n, err := p.r.ReadAt(b, p.off)
			p.off += int64(n)
			if n < len(b) {
				return p.ioErr(err)
			}
			return nil
		}
		want := min(int64(len(p.buf)), p.size-p.off)
		n, err := p.r.ReadAt(p.buf[:want], p.off)
		p.bufOff, p.bufN = p.off, n
		if n == 0 {
			return p.ioErr(err)
		}
	}
	return nil
}

func (p *parser) ioErr(err error) error {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return p.fail(ErrTruncated, "file ended early")
	}
	return fmt.Errorf("gguf: read at byte %d: %w", p.off, err)
}

func (p *parser) fixed(n int, l label) ([]byte, error) {
	if p.off+int64(n) > p.limit {
		return nil, p.room(uint64(n), l.String())
	}
	b := p.tmp[:n]
	if err := p.read(b); err != nil {
		return nil, err
	}
	return b, nil
}

func (p *parser) u32(l label) (uint32, error) {
	b, err := p.fixed(4, l)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (p *parser) u64(l label) (uint64, error) {
	b, err := p.fixed(8, l)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// label names what is being read, for error messages; it is formatted only
// when something fails, so reading a 150,000-entry array costs no formatting.
type label struct {
	kind, name string // "key" or "tensor" and its name, if any
	what       string // e.g. "value", "dimension count"
	idx        int    // element or entry number, -1 if none
}

func lbl(what string) label { return label{what: what, idx: -1} }

func keyLbl(key, what string) label { return label{kind: "key", name: key, what: what, idx: -1} }

func tensorLbl(name, what string) label {
	return label{kind: "tensor", name: name, what: what, idx: -1}
}

func (l label) String() string {
	s := l.what
	if l.kind != "" {
		s = l.kind + " " + short(l.name) + " " + s
	}
	if l.idx >= 0 {
		s += fmt.Sprintf(" %d", l.idx)
	}
	return s
}

func (p *parser) str(limit uint64, l label) (string, error) {
	if p.off+8 > p.limit {
		return "", p.room(8, l.String()+" length")
	}
	b := p.tmp[:8]
	if err := p.read(b); err != nil {
		return "", err
	}
	n := binary.LittleEndian.Uint64(b)
	if n > limit {
		p.off -= 8
		return "", p.fail(ErrInvalid, "%s length %d exceeds limit %d", l, n, limit)
	}
	if n == 0 {
		return "", nil
	}
	if n > uint64(p.size-p.off) || n > uint64(p.limit-p.off) {
		return "", p.room(n, l.String())
	}
	buf := make([]byte, n)
	if err := p.read(buf); err != nil {
		return "", err
	}
	// buf is never written again, so the string may share it.
	return unsafe.String(&buf[0], len(buf)), nil
}

func (p *parser) file() (*File, error) {
	if p.size < 4 {
		return nil, p.fail(ErrNotGGUF, "file is %d bytes, too short for a GGUF header", p.size)
	}
	magic, err := p.fixed(4, lbl("magic"))
	if err != nil {
		return nil, err
	}
	switch string(magic) {
	case "GGUF":
	case "FUGG": // the magic written as a big-endian uint32
		return nil, p.fail(ErrUnsupported, "big-endian GGUF files are not supported")
	default:
		return nil, &Error{Kind: ErrNotGGUF, Msg: fmt.Sprintf("file starts with %q, not \"GGUF\"", magic)}
	}
	f := &File{Size: p.size, Alignment: DefaultAlignment, index: map[string]int{}}
	if f.Version, err = p.u32(lbl("version")); err != nil {
		return nil, err
	}
	switch v := f.Version; {
	case v == 2 || v == 3:
	case v&0xFFFF == 0:
		return nil, p.fail(ErrUnsupported, "version %#x looks byte-swapped: big-endian GGUF files are not supported", v)
	case v == 1:
		return nil, p.fail(ErrUnsupported, "GGUF version 1 is no longer supported")
	default:
		return nil, p.fail(ErrUnsupported, "unknown GGUF version %d (supported: 2, 3)", v)
	}
	nTensors, err := p.u64(lbl("tensor count"))
	if err != nil {
		return nil, err
	}
	if nTensors > MaxTensorCount {
		return nil, p.fail(ErrInvalid, "tensor count %d exceeds limit %d", nTensors, MaxTensorCount)
	}
	nKV, err := p.u64(lbl("metadata count"))
	if err != nil {
		return nil, err
	}
	if nKV > MaxKVCount {
		return nil, p.fail(ErrInvalid, "metadata count %d exceeds limit %d", nKV, MaxKVCount)
	}
	// Smallest pair: key length, type, one byte of value.
	if err := p.room(nKV*13, fmt.Sprintf("%d metadata pairs", nKV)); err != nil {
		return nil, err
	}
	f.KVs = make([]KV, 0, nKV)
	for i := range nKV {
		key, err := p.str(MaxKeyLen, label{what: "metadata key", idx: int(i)})
		if err != nil {
			return nil, err
		}
		if _, dup := f.index[key]; dup {
			return nil, p.fail(ErrInvalid, "duplicate metadata key %s", short(key))
		}
		t, err := p.u32(keyLbl(key, "value type"))
		if err != nil {
			return nil, err
		}
		v, err := p.value(ValueType(t), 0, key)
		if err != nil {
			return nil, err
		}
		f.index[key] = len(f.KVs)
		f.KVs = append(f.KVs, KV{Key: key, Value: v})
	}

	if kv, ok := f.Value("general.alignment"); ok {
		a, isU32 := kv.Value.(uint32)
		if !isU32 { // llama.cpp asserts on any other type
			return nil, p.fail(ErrInvalid, "general.alignment is %s, want uint32", kv.Type())
		}
		if a == 0 || a&(a-1) != 0 || a > MaxAlignment {
			return nil, p.fail(ErrInvalid, "general.alignment %d is not a power of two up to %d", a, MaxAlignment)
		}
		f.Alignment = uint64(a)
	}

	// Smallest tensor entry: name length, n_dims, type, offset.
	if err := p.room(nTensors*24, fmt.Sprintf("%d tensor entries", nTensors)); err != nil {
		return nil, err
	}
	f.Tensors = make([]TensorInfo, 0, nTensors)
	names := make(map[string]struct{}, nTensors)
	for i := range nTensors {
		t, err := p.tensorInfo(i)
		if err != nil {
			return nil, err
		}
		if _, dup := names[t.Name]; dup {
			return nil, p.fail(ErrInvalid, "duplicate tensor name %s", short(t.Name))
		}
		names[t.Name] = struct{}{}
		f.Tensors = append(f.Tensors, t)
	}

	start := (uint64(p.off) + f.Alignment - 1) / f.Alignment * f.Alignment
	f.DataOffset = int64(start)
	if err := checkData(f); err != nil {
		return nil, err
	}
	return f, nil
}

func (p *parser) tensorInfo(i uint64) (TensorInfo, error) {
	name, err := p.str(MaxTensorNameLen, label{what: "tensor name", idx: int(i)})
	if err != nil {
		return TensorInfo{}, err
	}
	t := TensorInfo{Name: name}
	what := "tensor " + short(name)
	nDims, err := p.u32(tensorLbl(name, "dimension count"))
	if err != nil {
		return t, err
	}
	if nDims > MaxDims {
		return t, p.fail(ErrInvalid, "%s has %d dimensions, limit %d", what, nDims, MaxDims)
	}
	t.Dims = make([]uint64, nDims)
	elems := uint64(1)
	for j := range t.Dims {
		d, err := p.u64(tensorLbl(name, "dimension"))
		if err != nil {
			return t, err
		}
		if d == 0 || d > math.MaxInt64 {
			return t, p.fail(ErrInvalid, "%s dimension %d is %d", what, j, d)
		}
		hi, lo := bits.Mul64(elems, d)
		if hi != 0 || lo > math.MaxInt64/8 {
			return t, p.fail(ErrInvalid, "%s has too many elements", what)
		}
		t.Dims[j], elems = d, lo
	}
	typ, err := p.u32(tensorLbl(name, "type"))
	if err != nil {
		return t, err
	}
	t.Type = TensorType(typ)
	tt, ok := tensorTypes[t.Type]
	if !ok {
		return t, p.fail(ErrInvalid, "%s has unknown ggml type %d", what, typ)
	}
	if len(t.Dims) > 0 && t.Dims[0]%tt.block != 0 {
		return t, p.fail(ErrInvalid, "%s row of %d elements is not a multiple of the %s block size %d",
			what, t.Dims[0], tt.name, tt.block)
	}
	if len(t.Dims) == 0 && tt.block != 1 {
		return t, p.fail(ErrInvalid, "%s is a scalar of block type %s", what, tt.name)
	}
	if t.Offset, err = p.u64(tensorLbl(name, "offset")); err != nil {
		return t, err
	}
	return t, nil
}

// checkData checks that every tensor's data lies inside the file, aligned and
// not overlapping another's.
func checkData(f *File) error {
	start := uint64(f.DataOffset)
	type span struct {
		lo, hi uint64
		name   string
	}
	spans := make([]span, len(f.Tensors))
	for i, t := range f.Tensors {
		fail := func(kind error, format string, args ...any) error {
			return &Error{Kind: kind, Offset: f.DataOffset, Msg: fmt.Sprintf("tensor %s: ", short(t.Name)) + fmt.Sprintf(format, args...)}
		}
		if t.Offset%f.Alignment != 0 {
			return fail(ErrInvalid, "data offset %d is not a multiple of the alignment %d", t.Offset, f.Alignment)
		}
		n := t.Bytes()
		lo := start + t.Offset
		hi := lo + n
		if lo < start || hi < lo || hi > uint64(f.Size) {
			return fail(ErrTruncated, "data at %d+%d (%d bytes) extends past the end of the file (%d bytes)",
				start, t.Offset, n, f.Size)
		}
		spans[i] = span{lo, hi, t.Name}
	}
	slices.SortFunc(spans, func(a, b span) int {
		if a.lo != b.lo {
			if a.lo < b.lo {
				return -1
			}
			return 1
		}
		return 0
	})
	for i := 1; i < len(spans); i++ {
		if spans[i].lo < spans[i-1].hi {
			return &Error{Kind: ErrInvalid, Offset: int64(spans[i].lo),
				Msg: fmt.Sprintf("tensors %s and %s overlap", short(spans[i-1].name), short(spans[i].name))}
		}
	}
	return nil
}

func (p *parser) value(t ValueType, depth int, key string) (any, error) {
	if t == TypeArray {
		if depth >= MaxArrayDepth {
			return nil, p.fail(ErrInvalid, "key %s: arrays nested deeper than %d", short(key), MaxArrayDepth)
		}
		et, err := p.u32(keyLbl(key, "array type"))
		if err != nil {
			return nil, err
		}
		elem := ValueType(et)
		if !elem.valid() {
			return nil, p.fail(ErrInvalid, "key %s: unknown array element type %d", short(key), et)
		}
		n, err := p.u64(keyLbl(key, "array length"))
		if err != nil {
			return nil, err
		}
		if n > MaxArrayLen {
			return nil, p.fail(ErrInvalid, "key %s: array of %d elements exceeds limit %d", short(key), n, MaxArrayLen)
		}
		cost := int(n)
		if elem == TypeArray {
			cost *= 8 // each inner array is a slice header and an interface
		}
		if p.values += cost; p.values > MaxValues {
			return nil, p.fail(ErrInvalid, "key %s: metadata holds more than %d array elements", short(key), MaxValues)
		}
		if need := n * uint64(elem.minSize()); p.off+int64(need) > p.limit {
			return nil, p.room(need, fmt.Sprintf("key %s: array of %d %s", short(key), n, elem))
		}
		return p.array(elem, int(n), depth+1, key)
	}
	if t == TypeString {
		return p.str(MaxStringLen, keyLbl(key, "value"))
	}
	if !t.valid() {
		return nil, p.fail(ErrInvalid, "key %s: unknown value type %d", short(key), uint32(t))
	}
	b, err := p.fixed(t.size(), keyLbl(key, "value"))
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return b[0], nil
	case TypeInt8:
		return int8(b[0]), nil
	case TypeBool:
		return b[0] != 0, nil
	case TypeUint16:
		return le.Uint16(b), nil
	case TypeInt16:
		return int16(le.Uint16(b)), nil
	case TypeUint32:
		return le.Uint32(b), nil
	case TypeInt32:
		return int32(le.Uint32(b)), nil
	case TypeFloat32:
		return math.Float32frombits(le.Uint32(b)), nil
	case TypeUint64:
		return le.Uint64(b), nil
	case TypeInt64:
		return int64(le.Uint64(b)), nil
	default: // TypeFloat64
		return math.Float64frombits(le.Uint64(b)), nil
	}
}

// array reads n elements of type t; room for n minimal elements has been checked.
func (p *parser) array(t ValueType, n, depth int, key string) (any, error) {
	switch t {
	case TypeString:
		out := make([]string, n)
		for i := range out {
			s, err := p.str(MaxStringLen, label{kind: "key", name: key, what: "element", idx: i})
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	case TypeArray:
		out := make([]any, n)
		for i := range out {
			v, err := p.value(TypeArray, depth, key)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	raw := make([]byte, n*t.size())
	if err := p.read(raw); err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return raw, nil
	case TypeInt8:
		return fill(n, func(i int) int8 { return int8(raw[i]) }), nil
	case TypeBool:
		return fill(n, func(i int) bool { return raw[i] != 0 }), nil
	case TypeUint16:
		return fill(n, func(i int) uint16 { return le.Uint16(raw[2*i:]) }), nil
	case TypeInt16:
		return fill(n, func(i int) int16 { return int16(le.Uint16(raw[2*i:])) }), nil
	case TypeUint32:
		return fill(n, func(i int) uint32 { return le.Uint32(raw[4*i:]) }), nil
	case TypeInt32:
		return fill(n, func(i int) int32 { return int32(le.Uint32(raw[4*i:])) }), nil
	case TypeFloat32:
		return fill(n, func(i int) float32 { return math.Float32frombits(le.Uint32(raw[4*i:])) }), nil
	case TypeUint64:
		return fill(n, func(i int) uint64 { return le.Uint64(raw[8*i:]) }), nil
	case TypeInt64:
		return fill(n, func(i int) int64 { return int64(le.Uint64(raw[8*i:])) }), nil
	default: // TypeFloat64
		return fill(n, func(i int) float64 { return math.Float64frombits(le.Uint64(raw[8*i:])) }), nil
	}
}

func fill[T any](n int, at func(int) T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = at(i)
	}
	return out
}

// short quotes s for an error message, cut to a readable length: keys and
// names come from the file and may be hostile.
func short(s string) string {
	const max = 80
	if len(s) > max {
		return fmt.Sprintf("%q...", s[:max])
	}
	return fmt.Sprintf("%q", s)
}
