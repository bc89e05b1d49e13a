package kv

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func key(model string, toks []int) Key {
	return Key{Model: model, Context: "ctx=1024", Tokens: HashTokens(toks)}
}

func entry(toks []int, n int) Entry {
	d := make([]byte, n)
	for i := range d {
		d[i] = byte(i*7 + len(toks))
	}
	return Entry{Tokens: toks, Data: d}
}

func TestRoundTripAndRestart(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	toks := []int{1, 2, 3, 40000}
	k, e := key("m", toks), entry(toks, 1000)
	if _, ok := s.Get(k); ok {
		t.Fatal("hit in an empty store")
	}
	if err := s.Put(k, e); err != nil {
		t.Fatal(err)
	}
	got, ok := s.Get(k)
	if !ok || !slices.Equal(got.Tokens, toks) || !bytes.Equal(got.Data, e.Data) {
		t.Fatalf("RAM get: ok=%v %v", ok, got.Tokens)
	}
	// A new store (a restarted app) reads it from disk.
	s2, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	got, ok = s2.Get(k)
	if !ok || !slices.Equal(got.Tokens, toks) || !bytes.Equal(got.Data, e.Data) {
		t.Fatalf("disk get: ok=%v %v", ok, got.Tokens)
	}
	if st := s2.Stats(); st.Hits != 1 || st.RAMEntries != 1 || st.DiskFiles != 1 {
		t.Errorf("stats %+v", st)
	}
	// Other tokens, model or settings miss.
	for _, other := range []Key{key("m", []int{1, 2, 3}), key("m2", toks), {Model: "m", Context: "ctx=2048", Tokens: HashTokens(toks)}} {
		if _, ok := s2.Get(other); ok {
			t.Errorf("%q: hit for another key", other.String())
		}
	}
	s2.Delete(k)
	if _, err := os.Stat(s2.Path(k)); !os.IsNotExist(err) {
		t.Errorf("file still there after Delete: %v", err)
	}
	if _, ok := s2.Get(k); ok {
		t.Error("hit after Delete")
	}
}

// TestDamagedFiles: every way a file can be wrong is a miss, and the file
// is deleted.
func TestDamagedFiles(t *testing.T) {
	toks := []int{5, 6, 7}
	k := key("m", toks)
	good := encode(k.String(), entry(toks, 300))
	le := binary.LittleEndian
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	cases := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"header only", good[:headerSize]},
		{"truncated", good[:len(good)-1]},
		{"extended", append(bytes.Clone(good), 0)},
		{"payload bit flip", edit(func(b []byte) []byte { b[len(b)-5] ^= 1; return b })},
		{"token bit flip", edit(func(b []byte) []byte { b[headerSize+len(k.String())] ^= 1; return b })},
		{"bad magic", edit(func(b []byte) []byte { b[0] = 'X'; return b })},
		{"other version", edit(func(b []byte) []byte { le.PutUint32(b[8:], version+1); return b })},
		{"huge payload length", edit(func(b []byte) []byte { le.PutUint64(b[24:], 1<<62); return b })},
		{"huge token count", edit(func(b []byte) []byte { le.PutUint32(b[16:], 1<<30); return b })},
		{"foreign key", encode(key("other", toks).String(), entry(toks, 300))},
		{"tokens not the key's", encode(k.String(), entry([]int{5, 6, 8}, 300))},
		{"not a state", []byte("hello, I am a text file\n")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s, _ := Open(Options{Dir: dir})
			if err := os.WriteFile(s.Path(k), c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			s, _ = Open(Options{Dir: dir}) // sees the file
			if e, ok := s.Get(k); ok {
				t.Fatalf("returned %d tokens from a damaged file", len(e.Tokens))
			}
			if _, err := os.Stat(s.Path(k)); !os.IsNotExist(err) {
				t.Errorf("damaged file not deleted: %v", err)
			}
			if st := s.Stats(); st.Discarded != 1 || st.DiskFiles != 0 || st.DiskBytes != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
	// The undamaged file itself passes.
	if _, err := decode(good, k); err != nil {
		t.Fatal(err)
	}
}

func TestBudgets(t *testing.T) {
	dir := t.TempDir()
	one := int64(len(encode(key("m", []int{0}).String(), entry([]int{0}, 1000))))
	s, err := Open(Options{Dir: dir, RAMBytes: 2500, DiskBytes: 3*one + 10})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]Key, 4)
	for i := range keys {
		toks := []int{i}
		keys[i] = key("m", toks)
		if i == 3 {
			time.Sleep(10 * time.Millisecond)
			s.Get(keys[0]) // 0 becomes the most recently used
			time.Sleep(10 * time.Millisecond)
		}
		if err := s.Put(keys[i], entry(toks, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	if st.RAMEntries != 2 || st.RAMBytes > 2500 {
		t.Errorf("RAM tier %d entries, %d bytes; budget 2500", st.RAMEntries, st.RAMBytes)
	}
	if st.DiskFiles != 3 || st.DiskBytes > 3*one+10 {
		t.Errorf("disk tier %d files, %d bytes; budget %d", st.DiskFiles, st.DiskBytes, 3*one+10)
	}
	// RAM keeps 0 (read) and 3 (written last); disk drops 1, the least recently used.
	for i, want := range []bool{true, false, false, true} {
		if _, ok := s.ram[keys[i].String()]; ok != want {
			t.Errorf("key %d in RAM = %v, want %v", i, ok, want)
		}
	}
	s2, _ := Open(Options{Dir: dir, RAMBytes: -1})
	for i, want := range []bool{true, false, true, true} {
		if _, ok := s2.Get(keys[i]); ok != want {
			t.Errorf("key %d on disk = %v, want %v", i, ok, want)
		}
	}
	// An entry larger than the RAM budget still goes to disk.
	big := key("m", []int{99})
	if err := s.Put(big, entry([]int{99}, 2000)); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get(big); !ok {
		t.Error("big entry lost")
	}
}

func TestRAMOnlyAndLeftovers(t *testing.T) {
	s, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := key("m", []int{1})
	if err := s.Put(k, entry([]int{1}, 10)); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get(k); !ok || s.Path(k) != "" {
		t.Error("RAM-only store")
	}
	if err := s.Put(k, Entry{}); err == nil {
		t.Error("empty entry accepted")
	}
	// A crash mid-write leaves a temporary file; Open removes it.
	dir := t.TempDir()
	tmp := filepath.Join(dir, "abc.kvs.123.tmp")
	os.WriteFile(tmp, []byte("partial"), 0o600)
	if _, err := Open(Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Error("temporary file left behind")
	}
}
