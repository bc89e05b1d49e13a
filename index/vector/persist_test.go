package vector

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// savedIndexes returns an exact and an HNSW index (with tombstones) over
// the same small corpus, plus queries.
func savedIndexes(t testing.TB, n, dim int) (map[string]Index, [][]float32) {
	t.Helper()
	ids, vecs, queries := testData(n, dim, 20, 11)
	e, _ := NewExact(dim)
	h, _ := NewHNSW(dim, Options{M: 8, EfConstruction: 64, EfSearch: 40, Seed: 5})
	for i, v := range vecs {
		e.Add(ids[i], v)
		h.Add(ids[i], v)
	}
	for i := 0; i < n; i += 5 {
		e.Delete(ids[i])
		h.Delete(ids[i])
	}
	if n > 1 {
		h.Add(ids[1], vecs[0]) // an update leaves a tombstone too
	}
	return map[string]Index{"exact": e, "hnsw": h}, queries
}

func save(t testing.TB, x Index) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := x.(Saver).Save(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestSaveLoad(t *testing.T) {
	for _, n := range []int{0, 1, 500} {
		xs, queries := savedIndexes(t, n, 24)
		for name, x := range xs {
			data := save(t, x)
			y, err := Load(bytes.NewReader(data), 24)
			if err != nil {
				t.Fatalf("%s n=%d: %v", name, n, err)
			}
			if got, want := typeName(y), typeName(x); got != want {
				t.Fatalf("%s: loaded a %s", want, got)
			}
			if y.Len() != x.Len() {
				t.Fatalf("%s n=%d: Len %d, want %d", name, n, y.Len(), x.Len())
			}
			for _, q := range queries {
				if a, b := x.Search(q, 10), y.Search(q, 10); !slices.Equal(a, b) {
					t.Fatalf("%s n=%d: results differ after load:\n%v\n%v", name, n, a, b)
				}
			}
			if h, ok := y.(*HNSW); ok {
				if o := h.Options(); o.M != 8 || o.EfConstruction != 64 || o.EfSearch != 40 || o.Seed != 5 {
					t.Fatalf("options after load: %+v", o)
				}
				if h.Deleted() != x.(*HNSW).Deleted() {
					t.Fatalf("Deleted %d after load", h.Deleted())
				}
			}
			if !bytes.Equal(save(t, y), data) {
				t.Fatalf("%s n=%d: saving the loaded index gives different bytes", name, n)
			}
			// The loaded index stays usable.
			if n > 0 {
				if err := y.Add(1<<40, queries[0]); err != nil {
					t.Fatal(err)
				}
				if got := y.Search(queries[0], 1); len(got) != 1 || got[0].ID != 1<<40 {
					t.Fatalf("%s: search after add on loaded index = %v", name, got)
				}
			}
		}
	}
}

func typeName(x Index) string {
	switch x.(type) {
	case *Exact:
		return "exact"
	case *HNSW:
		return "hnsw"
	}
	return "?"
}

// reseal recomputes both checksums of a saved file, so tests can reach the
// structural checks behind them.
func reseal(b []byte) {
	if len(b) < headerSize+4 {
		return
	}
	le := binary.LittleEndian
	le.PutUint32(b[headerSize:], crc32.Checksum(b[:headerSize], castagnoli))
	if len(b) >= headerSize+8 {
		le.PutUint32(b[len(b)-4:], crc32.Checksum(b[headerSize+4:len(b)-4], castagnoli))
	}
}

func TestLoadRejects(t *testing.T) {
	xs, _ := savedIndexes(t, 60, 8)
	good := save(t, xs["hnsw"])
	le := binary.LittleEndian
	n := int(le.Uint32(good[16:]))
	ids := headerSize + 4
	flags := ids + 8*n
	levels := flags + n
	vecs := levels + n
	links := vecs + 4*8*n

	edit := func(f func(b []byte) []byte, resealed bool) []byte {
		b := f(slices.Clone(good))
		if resealed {
			reseal(b)
		}
		return b
	}
	tests := []struct {
		name string
		data []byte
		dim  int
		want string
	}{
		{"empty", nil, 8, "truncated"},
		{"short header", good[:30], 8, "truncated"},
		{"magic", edit(func(b []byte) []byte { b[0] = 'X'; return b }, false), 8, "bad magic"},
		{"header bit", edit(func(b []byte) []byte { b[13] ^= 4; return b }, false), 8, "header checksum"},
		{"version", edit(func(b []byte) []byte { b[8] = 9; return b }, true), 8, "unsupported index version 9"},
		{"dim", good, 16, "wrong dimension"},
		{"kind", edit(func(b []byte) []byte { b[10] = 7; return b }, true), 8, "unknown kind"},
		{"count too big", edit(func(b []byte) []byte { le.PutUint32(b[16:], 1<<30); return b }, true), 8, "cannot fit"},
		{"live above count", edit(func(b []byte) []byte { le.PutUint32(b[20:], uint32(n+1)); return b }, true), 8, "live"},
		{"payload length", edit(func(b []byte) []byte { le.PutUint64(b[56:], le.Uint64(b[56:])+1); return b }, true), 8, "unread payload"},
		{"truncated payload", good[:len(good)/2], 8, "truncated"},
		{"no trailer", good[:len(good)-2], 8, "truncated"},
		{"payload bit", edit(func(b []byte) []byte { b[vecs+9] ^= 1; return b }, false), 8, "payload checksum"},
		{"trailer bit", edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, false), 8, "payload checksum"},
		{"flag", edit(func(b []byte) []byte { b[flags+3] = 2; return b }, true), 8, "flags"},
		{"duplicate id", edit(func(b []byte) []byte { copy(b[ids+8*2:], b[ids+8*3:ids+8*4]); return b }, true), 8, "stored twice"},
		{"nan", edit(func(b []byte) []byte { le.PutUint32(b[vecs:], 0x7fc00000); return b }, true), 8, "non-finite"},
		{"level", edit(func(b []byte) []byte { b[levels+1] = 200; return b }, true), 8, "level"},
		{"entry", edit(func(b []byte) []byte { le.PutUint32(b[40:], uint32(n)); return b }, true), 8, "entry point"},
		{"top", edit(func(b []byte) []byte { le.PutUint32(b[36:], 9); return b }, true), 8, "entry point"},
		{"M", edit(func(b []byte) []byte { le.PutUint32(b[24:], 1); return b }, true), 8, "parameters"},
		{"link count", edit(func(b []byte) []byte { le.PutUint16(b[links:], 999); return b }, true), 8, "links on layer"},
		{"link target", edit(func(b []byte) []byte { le.PutUint32(b[links+2:], uint32(n)); return b }, true), 8, "links to"},
		{"self link", edit(func(b []byte) []byte { le.PutUint32(b[links+2:], 0); return b }, true), 8, "links to"},
		{"trailing payload", edit(func(b []byte) []byte {
			b = slices.Insert(b, len(b)-4, 0, 0, 0, 0)
			le.PutUint64(b[56:], le.Uint64(b[56:])+4)
			return b
		}, true), 8, "unread payload"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(bytes.NewReader(tc.data), tc.dim)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// Every truncation and every single-bit flip of the header and of a
	// spread of payload bytes is rejected.
	for _, name := range []string{"exact", "hnsw"} {
		data := save(t, xs[name])
		for i := range len(data) {
			if _, err := Load(bytes.NewReader(data[:i]), 8); err == nil {
				t.Fatalf("%s: truncated to %d bytes loaded", name, i)
			}
		}
		for i := 0; i < len(data); i += 1 + i/64 {
			for bit := range 8 {
				b := slices.Clone(data)
				b[i] ^= 1 << bit
				if _, err := Load(bytes.NewReader(b), 8); err == nil {
					t.Fatalf("%s: flipped bit %d of byte %d loaded", name, bit, i)
				}
			}
		}
	}
}

func TestSaveFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vectors.idx")
	xs, queries := savedIndexes(t, 200, 8)
	h := xs["hnsw"]
	sum, err := SaveFile(path, h.(Saver))
	if err != nil {
		t.Fatal(err)
	}
	if len(sum) != 64 {
		t.Fatalf("checksum %q", sum)
	}
	// Overwriting works, and leaves no temporary files behind.
	sum2, err := SaveFile(path, h.(Saver))
	if err != nil || sum2 != sum {
		t.Fatalf("second save: %v, checksum %s vs %s", err, sum2, sum)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("folder holds %d entries", len(ents))
	}

	y, err := LoadFile(path, sum, 8)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(y.Search(queries[0], 5), h.Search(queries[0], 5)) {
		t.Fatal("loaded file answers differently")
	}
	if _, err := LoadFile(path, "", 8); err != nil {
		t.Fatalf("LoadFile without checksum: %v", err)
	}
	if _, err := LoadFile(path, strings.Repeat("0", 64), 8); !errors.Is(err, ErrChecksum) {
		t.Fatalf("wrong checksum: %v", err)
	}
	if _, err := LoadFile(filepath.Join(dir, "missing"), sum, 8); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	// A file damaged on disk fails the checksum, and without one, the CRC.
	data, _ := os.ReadFile(path)
	data[len(data)/2] ^= 0x10
	os.WriteFile(path, data, 0o644)
	if _, err := LoadFile(path, sum, 8); !errors.Is(err, ErrChecksum) {
		t.Fatalf("damaged file with checksum: %v", err)
	}
	if _, err := LoadFile(path, "", 8); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged file without checksum: %v", err)
	}
	// A failing save leaves the old file alone.
	if _, err := SaveFile(filepath.Join(dir, "no", "such", "dir"), h.(Saver)); err == nil {
		t.Fatal("save into a missing folder succeeded")
	}
}

func TestAutoSaveLoad(t *testing.T) {
	ids, vecs, queries := testData(300, 8, 5, 12)
	a, _ := NewAuto(8, Options{Crossover: 100})
	fill(t, a, ids, vecs)
	var b bytes.Buffer
	if err := a.Save(&b); err != nil {
		t.Fatal(err)
	}
	x, err := Load(&b, 8)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := AutoFrom(x, Options{Crossover: 100})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := a2.Inner().(*HNSW); !ok {
		t.Fatalf("reloaded Auto holds a %T", a2.Inner())
	}
	if !slices.Equal(a.Search(queries[0], 10), a2.Search(queries[0], 10)) {
		t.Fatal("reloaded Auto answers differently")
	}
}

// FuzzLoad feeds damaged files to Load. With fix set it first recomputes
// the checksums, so that the structural checks behind them are exercised.
// Whatever loads must be searchable, updatable and saveable.
func FuzzLoad(f *testing.F) {
	for _, n := range []int{0, 1, 40} {
		xs, _ := savedIndexes(f, n, 4)
		f.Add(save(f, xs["exact"]), false)
		f.Add(save(f, xs["hnsw"]), true)
	}
	q := []float32{0.5, 0.5, 0.5, 0.5}
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix {
			data = slices.Clone(data)
			reseal(data)
		}
		x, err := Load(bytes.NewReader(data), 4)
		if err != nil {
			return
		}
		x.Search(q, 5)
		x.Add(12345, q)
		x.Delete(12345)
		x.Search(q, 50)
		if h, ok := x.(*HNSW); ok {
			if err := h.Rebuild(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		var b bytes.Buffer
		if err := x.(Saver).Save(&b); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(&b, 4); err != nil {
			t.Fatalf("re-load of a loaded index: %v", err)
		}
	})
}
