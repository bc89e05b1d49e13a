package vector

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
)

// File format, version 1, all integers little-endian:
//
//	header (68 bytes)
//	  0  magic "LOREVEC\x00"
//	  8  version u16 | kind u8 (1 exact, 2 hnsw) | reserved u8
//	 12  dim u32 | count u32 (nodes, tombstones included) | live u32
//	 24  M u32 | efConstruction u32 | efSearch u32 (0 for exact)
//	 36  top level u32 | entry node u32 (0xFFFFFFFF when empty) | reserved u32
//	 48  seed u64 | payload length u64
//	 64  CRC-32C of bytes 0..63
//	payload
//	  ids      count × i64
//	  flags    count × u8 (bit 0: tombstone)
//	  levels   count × u8 (hnsw only)
//	  vectors  count × dim × f32
//	  links    (hnsw only) for each node, for layers 0..level: u16 n, n × u32
//	trailer: CRC-32C of the payload (u32)
//
// Load checks every field and link before using it, so a damaged file gives
// an error, never a panic or a huge allocation.

const (
	magic      = "LOREVEC\x00"
	version    = 1
	kindExact  = 1
	kindHNSW   = 2
	headerSize = 64
	noEntry    = math.MaxUint32
	maxNodes   = math.MaxInt32
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt wraps every error that Load reports about the data itself.
var ErrCorrupt = errors.New("vector: corrupt index file")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Saver is an index that can write itself in the format Load reads.
type Saver interface {
	Save(w io.Writer) error
}

type header struct {
	kind             uint8
	dim, count, live uint32
	m, efc, efs      uint32
	top, entry       uint32
	seed             uint64
	payload          uint64
}

func (h *header) marshal() []byte {
	b := make([]byte, headerSize, headerSize+4)
	copy(b, magic)
	le := binary.LittleEndian
	le.PutUint16(b[8:], version)
	b[10] = h.kind
	le.PutUint32(b[12:], h.dim)
	le.PutUint32(b[16:], h.count)
	le.PutUint32(b[20:], h.live)
	le.PutUint32(b[24:], h.m)
	le.PutUint32(b[28:], h.efc)
	le.PutUint32(b[32:], h.efs)
	le.PutUint32(b[36:], h.top)
	le.PutUint32(b[40:], h.entry)
	le.PutUint64(b[48:], h.seed)
	le.PutUint64(b[56:], h.payload)
	return le.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// writer writes little-endian values through a buffer and keeps a CRC of
// the payload.
type writer struct {
	w   *bufio.Writer
	crc uint32
	buf []byte
	err error
}

func (w *writer) flush() {
	if w.err == nil && len(w.buf) > 0 {
		w.crc = crc32.Update(w.crc, castagnoli, w.buf)
		_, w.err = w.w.Write(w.buf)
	}
	w.buf = w.buf[:0]
}

func (w *writer) room(n int) {
	if len(w.buf)+n > cap(w.buf) {
		w.flush()
	}
}

func (w *writer) u8(v uint8)   { w.room(1); w.buf = append(w.buf, v) }
func (w *writer) u16(v uint16) { w.room(2); w.buf = binary.LittleEndian.AppendUint16(w.buf, v) }
func (w *writer) u32(v uint32) { w.room(4); w.buf = binary.LittleEndian.AppendUint32(w.buf, v) }
func (w *writer) u64(v uint64) { w.room(8); w.buf = binary.LittleEndian.AppendUint64(w.buf, v) }

func (w *writer) f32s(v []float32) {
	for _, x := range v {
		w.u32(math.Float32bits(x))
	}
}

// write emits header, the payload written by body, and the trailer.
func write(out io.Writer, h header, body func(*writer)) error {
	bw := bufio.NewWriterSize(out, 1<<16)
	if _, err := bw.Write(h.marshal()); err != nil {
		return fmt.Errorf("vector: save: %w", err)
	}
	w := &writer{w: bw, buf: make([]byte, 0, 1<<16)}
	body(w)
	w.flush()
	if w.err == nil {
		_, w.err = bw.Write(binary.LittleEndian.AppendUint32(nil, w.crc))
	}
	if w.err == nil {
		w.err = bw.Flush()
	}
	if w.err != nil {
		return fmt.Errorf("vector: save: %w", w.err)
	}
	return nil
}

// Save writes the index; see Load.
func (e *Exact) Save(out io.Writer) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	n := uint32(len(e.ids))
	h := header{kind: kindExact, dim: uint32(e.dim), count: n, live: n, entry: noEntry,
		payload: uint64(n) * (8 + 1 + 4*uint64(e.dim))}
	return write(out, h, func(w *writer) {
		for _, id := range e.ids {
			w.u64(uint64(id))
		}
		for range e.ids {
			w.u8(0)
		}
		w.f32s(e.vecs)
	})
}

// Save writes the index, tombstones included; see Load.
func (x *HNSW) Save(out io.Writer) error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	g := x.g
	n := uint64(len(g.ids))
	payload := n * (8 + 1 + 1 + 4*uint64(g.dim))
	for i := range g.ids {
		for l := 0; l <= int(g.levels[i]); l++ {
			payload += 2 + 4*uint64(g.links(uint32(i), l)[0])
		}
	}
	entry := uint32(noEntry)
	if g.entry >= 0 {
		entry = uint32(g.entry)
	}
	h := header{kind: kindHNSW, dim: uint32(g.dim), count: uint32(n), live: uint32(len(g.byID)),
		m: uint32(g.m), efc: uint32(g.efc), efs: uint32(x.opt.EfSearch), top: uint32(g.top),
		entry: entry, seed: x.opt.Seed, payload: payload}
	return write(out, h, func(w *writer) {
		for _, id := range g.ids {
			w.u64(uint64(id))
		}
		for _, d := range g.dead {
			if d {
				w.u8(1)
			} else {
				w.u8(0)
			}
		}
		for _, l := range g.levels {
			w.u8(l)
		}
		w.f32s(g.vecs)
		for i := range g.ids {
			for l := 0; l <= int(g.levels[i]); l++ {
				ls := g.links(uint32(i), l)
				w.u16(uint16(ls[0]))
				for _, v := range ls[1 : 1+ls[0]] {
					w.u32(v)
				}
			}
		}
	})
}

// reader reads the payload in bounded chunks, keeping its CRC and the count
// of bytes left, so that no allocation outruns the data actually present.
type reader struct {
	r    *bufio.Reader
	crc  uint32
	left uint64
	buf  []byte
}

func (r *reader) next(n int) ([]byte, error) {
	if uint64(n) > r.left {
		return nil, corrupt("payload shorter than its contents")
	}
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	b := r.buf[:n]
	if _, err := io.ReadFull(r.r, b); err != nil {
		return nil, truncated(err)
	}
	r.left -= uint64(n)
	r.crc = crc32.Update(r.crc, castagnoli, b)
	return b, nil
}

func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corrupt("truncated")
	}
	return fmt.Errorf("vector: load: %w", err)
}

// chunks reads n elements of size bytes each, handing them to fn a chunk
// at a time.
func (r *reader) chunks(n uint64, size int, fn func(b []byte)) error {
	per := uint64((1 << 16) / size)
	for n > 0 {
		c := min(n, per)
		b, err := r.next(int(c) * size)
		if err != nil {
			return err
		}
		fn(b)
		n -= c
	}
	return nil
}

// Load reads an index written by Save and checks that its vectors have
// length dim. It returns an *Exact or an *HNSW, as saved.
func Load(in io.Reader, dim int) (Index, error) {
	br := bufio.NewReaderSize(in, 1<<16)
	hb := make([]byte, headerSize+4)
	if _, err := io.ReadFull(br, hb); err != nil {
		return nil, truncated(err)
	}
	le := binary.LittleEndian
	if string(hb[:8]) != magic {
		return nil, corrupt("not a Lore vector index (bad magic)")
	}
	if crc32.Checksum(hb[:headerSize], castagnoli) != le.Uint32(hb[headerSize:]) {
		return nil, corrupt("header checksum mismatch")
	}
	if v := le.Uint16(hb[8:]); v != version {
		return nil, fmt.Errorf("vector: unsupported index version %d (want %d)", v, version)
	}
	h := header{kind: hb[10], dim: le.Uint32(hb[12:]), count: le.Uint32(hb[16:]), live: le.Uint32(hb[20:]),
		m: le.Uint32(hb[24:]), efc: le.Uint32(hb[28:]), efs: le.Uint32(hb[32:]), top: le.Uint32(hb[36:]),
		entry: le.Uint32(hb[40:]), seed: le.Uint64(hb[48:]), payload: le.Uint64(hb[56:])}
	if int64(h.dim) != int64(dim) {
		return nil, fmt.Errorf("%w: index has %d, want %d", ErrDim, h.dim, dim)
	}
	if err := checkDim(dim); err != nil {
		return nil, err
	}
	per := 8 + 1 + 4*uint64(h.dim)
	if h.kind == kindHNSW {
		per += 1 + 2 // level, and at least a layer-0 count
	}
	switch {
	case h.kind != kindExact && h.kind != kindHNSW:
		return nil, corrupt("unknown kind %d", h.kind)
	case h.count > maxNodes || h.live > h.count:
		return nil, corrupt("count %d, live %d", h.count, h.live)
	case uint64(h.count) > h.payload/per:
		return nil, corrupt("%d nodes cannot fit in %d payload bytes", h.count, h.payload)
	}
	r := &reader{r: br, left: h.payload}

	ids := make([]int64, 0, min(h.count, 1<<20))
	if err := r.chunks(uint64(h.count), 8, func(b []byte) {
		for i := 0; i < len(b); i += 8 {
			ids = append(ids, int64(le.Uint64(b[i:])))
		}
	}); err != nil {
		return nil, err
	}
	dead := make([]bool, 0, len(ids))
	bad := false
	if err := r.chunks(uint64(h.count), 1, func(b []byte) {
		for _, f := range b {
			bad = bad || f > 1
			dead = append(dead, f == 1)
		}
	}); err != nil {
		return nil, err
	}
	if bad {
		return nil, corrupt("unknown node flags")
	}
	var levels []uint8
	if h.kind == kindHNSW {
		levels = make([]uint8, 0, len(ids))
		if err := r.chunks(uint64(h.count), 1, func(b []byte) { levels = append(levels, b...) }); err != nil {
			return nil, err
		}
	}
	vecs := make([]float32, 0, min(uint64(h.count)*uint64(h.dim), 1<<22))
	if err := r.chunks(uint64(h.count)*uint64(h.dim), 4, func(b []byte) {
		for i := 0; i < len(b); i += 4 {
			x := math.Float32frombits(le.Uint32(b[i:]))
			bad = bad || math.IsNaN(float64(x)) || math.IsInf(float64(x), 0)
			vecs = append(vecs, x)
		}
	}); err != nil {
		return nil, err
	}
	if bad {
		return nil, corrupt("non-finite vector component")
	}

	live := 0
	byID := make(map[int64]uint32, h.live)
	for n, id := range ids {
		if dead[n] {
			continue
		}
		if _, dup := byID[id]; dup {
			return nil, corrupt("id %d stored twice", id)
		}
		byID[id] = uint32(n)
		live++
	}
	if uint32(live) != h.live {
		return nil, corrupt("%d live nodes, header says %d", live, h.live)
	}

	var idx Index
	var err error
	if h.kind == kindExact {
		idx, err = loadExact(h, ids, vecs, byID)
	} else {
		idx, err = loadHNSW(r, h, ids, dead, levels, vecs, byID)
	}
	if err != nil {
		return nil, err
	}
	if r.left != 0 {
		return nil, corrupt("%d unread payload bytes", r.left)
	}
	tb := make([]byte, 4)
	if _, err := io.ReadFull(br, tb); err != nil {
		return nil, truncated(err)
	}
	if le.Uint32(tb) != r.crc {
		return nil, corrupt("payload checksum mismatch")
	}
	return idx, nil
}

func loadExact(h header, ids []int64, vecs []float32, byID map[int64]uint32) (*Exact, error) {
	if h.live != h.count {
		return nil, corrupt("exact index with tombstones")
	}
	if h.entry != noEntry || h.top != 0 || h.m != 0 || h.efc != 0 || h.efs != 0 || h.seed != 0 {
		return nil, corrupt("graph parameters in an exact index")
	}
	e := &Exact{dim: int(h.dim), ids: ids, vecs: vecs, pos: make(map[int64]int, len(byID))}
	for id, n := range byID {
		e.pos[id] = int(n)
	}
	return e, nil
}

func loadHNSW(r *reader, h header, ids []int64, dead []bool, levels []uint8, vecs []float32, byID map[int64]uint32) (*HNSW, error) {
	opt := Options{M: int(h.m), EfConstruction: int(h.efc), EfSearch: int(h.efs), Seed: h.seed}.withDefaults()
	if h.m < 2 || h.m > maxM || h.efc < 1 || h.efc > maxEf || h.efs < 1 || h.efs > maxEf {
		return nil, corrupt("parameters M=%d efConstruction=%d efSearch=%d", h.m, h.efc, h.efs)
	}
	g := newGraph(int(h.dim), opt)
	g.ids, g.dead, g.levels, g.vecs, g.byID = ids, dead, levels, vecs, byID
	g.ndead = len(ids) - len(byID)

	count := uint32(len(ids))
	top := uint8(0)
	for _, l := range levels {
		if l > maxLevel {
			return nil, corrupt("level %d above %d", l, maxLevel)
		}
		top = max(top, l)
	}
	switch {
	case count == 0 && (h.entry != noEntry || h.top != 0):
		return nil, corrupt("entry point in an empty graph")
	case count > 0 && (h.entry >= count || levels[h.entry] != top || h.top != uint32(top)):
		return nil, corrupt("entry point %d at level %d, top level %d", h.entry, h.top, top)
	}
	if count > 0 {
		g.entry, g.top = int32(h.entry), int(top)
	}

	g.links0 = make([]uint32, 0, min(uint64(count)*uint64(g.m0+1), 1<<22))
	g.upper = make([][]uint32, count)
	le := binary.LittleEndian
	for n := range count {
		g.links0 = append(g.links0, make([]uint32, g.m0+1)...)
		if levels[n] > 0 {
			g.upper[n] = make([]uint32, int(levels[n])*(g.m+1))
		}
		for l := 0; l <= int(levels[n]); l++ {
			b, err := r.next(2)
			if err != nil {
				return nil, err
			}
			k := int(le.Uint16(b))
			if mmax := g.mmax(l); k > mmax {
				return nil, corrupt("node %d has %d links on layer %d, at most %d", n, k, l, mmax)
			}
			b, err = r.next(4 * k)
			if err != nil {
				return nil, err
			}
			ls := g.links(n, l)
			ls[0] = uint32(k)
			for i := range k {
				t := le.Uint32(b[4*i:])
				if t >= count || t == n || int(levels[t]) < l {
					return nil, corrupt("node %d links to %d on layer %d", n, t, l)
				}
				ls[1+i] = t
			}
		}
	}
	return newHNSW(g, opt), nil
}

// SaveFile writes x to path atomically (a temporary file in the same
// folder, synced, then renamed over path) and returns the file's SHA-256 in
// hex, for the caller to record next to the index generation.
func SaveFile(path string, x Saver) (checksum string, err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("vector: save: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	sum := sha256.New()
	if err := x.Save(io.MultiWriter(f, sum)); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("vector: save: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("vector: save: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return "", fmt.Errorf("vector: save: %w", err)
	}
	// Make the rename itself durable. Folders cannot be synced on Windows,
	// so a failure here is not an error.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

// ErrChecksum reports an index file that is not the one recorded.
var ErrChecksum = errors.New("vector: index file checksum mismatch")

// LoadFile verifies that the file at path has the SHA-256 checksum that
// SaveFile returned, then loads it. An empty checksum skips that check (the
// file's own CRCs are still verified).
func LoadFile(path, checksum string, dim int) (Index, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("vector: load: %w", err)
	}
	defer f.Close()
	if checksum != "" {
		got, err := fileSum(f, sha256.New())
		if err != nil {
			return nil, fmt.Errorf("vector: load %s: %w", path, err)
		}
		if got != checksum {
			return nil, fmt.Errorf("%w: %s has %s, want %s", ErrChecksum, path, got, checksum)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("vector: load: %w", err)
		}
	}
	x, err := Load(f, dim)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return x, nil
}

func fileSum(r io.Reader, h hash.Hash) (string, error) {
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
