// Package kv stores llama.cpp KV-cache states so that a prompt prefix read
// once (a system prompt, say) can be restored in milliseconds instead of
// being evaluated again, even after a restart.
//
// A Store has a RAM tier (a byte budget, least recently used out first) and
// an optional disk tier under a folder (likewise). A state is valid only for
// the exact model file, context settings and tokens it was made from, so
// each is stored under a Key of those. Disk files are written to a
// temporary name and renamed, and carry a header with a magic number, a
// format version, the key, the tokens and a SHA-256 of all of it: a file
// that is corrupt, truncated, of another version or another key is deleted
// and reported as a miss, never returned. States returned by Get are thus
// exactly bytes that Put was given.
package kv

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Key identifies one state.
type Key struct {
	// Model identifies the model file (name, size, modification time or a
	// content hash): a replaced file must not match.
	Model string
	// Context describes the settings that shape the state's bytes: context
	// and cache sizes, sequences, flash attention, CPU variant, llama.cpp
	// version.
	Context string
	// Tokens is HashTokens of the token sequence whose KV the state holds.
	Tokens [32]byte
}

// HashTokens returns the SHA-256 of the token ids (uint32, little endian).
func HashTokens(toks []int) [32]byte {
	return sha256.Sum256(tokenBytes(toks))
}

func tokenBytes(toks []int) []byte {
	b := make([]byte, 4*len(toks))
	for i, t := range toks {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(t))
	}
	return b
}

// String is the key as written into a file's header.
func (k Key) String() string {
	return k.Model + "\x00" + k.Context + "\x00" + hex.EncodeToString(k.Tokens[:])
}

// file is the key's file name: a hash, since model names and settings are
// not safe path elements.
func (k Key) file() string {
	h := sha256.Sum256([]byte(k.String()))
	return hex.EncodeToString(h[:16]) + ext
}

// Entry is one saved state: the tokens it holds and llama.cpp's bytes.
type Entry struct {
	Tokens []int
	Data   []byte
}

func (e Entry) size() int64 { return int64(len(e.Data) + 8*len(e.Tokens)) }

// Options configures a Store.
type Options struct {
	// Dir is the disk tier's folder, created if missing; "" keeps states in
	// RAM only.
	Dir string
	// RAMBytes and DiskBytes are the tiers' budgets (defaults 256 MiB and
	// 2 GiB; negative disables the tier).
	RAMBytes  int64
	DiskBytes int64
}

// Stats is a snapshot of a Store.
type Stats struct {
	RAMEntries int   `json:"ram_entries"`
	RAMBytes   int64 `json:"ram_bytes"`
	DiskFiles  int   `json:"disk_files"`
	DiskBytes  int64 `json:"disk_bytes"`
	Hits       int   `json:"hits"`
	Misses     int   `json:"misses"`
	// Discarded counts disk files deleted because they failed their checks.
	Discarded int `json:"discarded"`
}

// Store holds states in RAM and on disk. It is safe for concurrent use.
type Store struct {
	opt Options

	mu       sync.Mutex
	ram      map[string]*list.Element // by Key.String(); values *ramEntry
	lru      *list.List               // front: most recently used
	ramBytes int64
	disk     map[string]diskFile // by file name
	diskUsed int64
	stats    Stats
}

type ramEntry struct {
	key string
	e   Entry
}

type diskFile struct {
	size int64
	used time.Time
}

const (
	ext     = ".kvs"
	tmpExt  = ".tmp"
	magic   = "LOREKVS\x00"
	version = 1
	// header: magic, version, key length, token count, reserved, payload
	// length, SHA-256 of key, tokens and payload.
	headerSize = 8 + 4 + 4 + 4 + 4 + 8 + 32
	maxKeyLen  = 1 << 16
	maxTokens  = 1 << 24
)

// Open returns a store. With a Dir it lists the files already there (and
// removes temporary files a crash left behind); their contents are checked
// when first read.
func Open(opt Options) (*Store, error) {
	if opt.RAMBytes == 0 {
		opt.RAMBytes = 256 << 20
	}
	if opt.DiskBytes == 0 {
		opt.DiskBytes = 2 << 30
	}
	s := &Store{opt: opt, ram: map[string]*list.Element{}, lru: list.New(), disk: map[string]diskFile{}}
	if opt.Dir == "" || opt.DiskBytes < 0 {
		s.opt.Dir = ""
		return s, nil
	}
	if err := os.MkdirAll(opt.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("kv store: %w", err)
	}
	ents, err := os.ReadDir(opt.Dir)
	if err != nil {
		return nil, fmt.Errorf("kv store: %w", err)
	}
	for _, de := range ents {
		name := de.Name()
		switch {
		case strings.HasSuffix(name, tmpExt):
			os.Remove(filepath.Join(opt.Dir, name))
		case strings.HasSuffix(name, ext) && de.Type().IsRegular():
			if fi, err := de.Info(); err == nil {
				s.disk[name] = diskFile{size: fi.Size(), used: fi.ModTime()}
				s.diskUsed += fi.Size()
			}
		}
	}
	s.mu.Lock()
	s.trimDisk("")
	s.mu.Unlock()
	return s, nil
}

// Get returns the state saved under k, from RAM or else from disk (a disk
// hit is checked, then kept in RAM too). A file that fails its checks is
// deleted and counted in Stats.Discarded.
func (s *Store) Get(k Key) (Entry, bool) {
	key := k.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	name := k.file()
	if el, ok := s.ram[key]; ok {
		s.lru.MoveToFront(el)
		s.touch(name)
		s.stats.Hits++
		return el.Value.(*ramEntry).e, true
	}
	if _, ok := s.disk[name]; !ok || s.opt.Dir == "" {
		s.stats.Misses++
		return Entry{}, false
	}
	path := filepath.Join(s.opt.Dir, name)
	e, err := readFile(path, k)
	if err != nil {
		// Corrupt, truncated, foreign or gone: never hand it out.
		os.Remove(path)
		s.diskUsed -= s.disk[name].size
		delete(s.disk, name)
		s.stats.Discarded++
		s.stats.Misses++
		return Entry{}, false
	}
	s.touch(name)
	s.putRAM(key, e)
	s.stats.Hits++
	return e, true
}

// Put saves e under k in both tiers (a state larger than a tier's whole
// budget skips that tier). The caller must not modify e afterwards.
func (s *Store) Put(k Key, e Entry) error {
	if len(e.Data) == 0 || len(e.Tokens) == 0 {
		return errors.New("kv store: empty entry")
	}
	if len(e.Tokens) > maxTokens {
		return fmt.Errorf("kv store: %d tokens", len(e.Tokens))
	}
	key := k.String()
	if len(key) > maxKeyLen {
		return errors.New("kv store: key too long")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putRAM(key, e)
	if s.opt.Dir == "" {
		return nil
	}
	b := encode(key, e)
	if int64(len(b)) > s.opt.DiskBytes {
		return nil
	}
	name := k.file()
	if err := writeAtomic(filepath.Join(s.opt.Dir, name), b); err != nil {
		return fmt.Errorf("kv store: %w", err)
	}
	s.diskUsed += int64(len(b)) - s.disk[name].size
	s.disk[name] = diskFile{size: int64(len(b)), used: time.Now()}
	s.trimDisk(name)
	return nil
}

// Delete removes k's state from both tiers.
func (s *Store) Delete(k Key) {
	key := k.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.ram[key]; ok {
		s.removeRAM(el)
	}
	name := k.file()
	if f, ok := s.disk[name]; ok {
		os.Remove(filepath.Join(s.opt.Dir, name))
		s.diskUsed -= f.size
		delete(s.disk, name)
	}
}

// Path is the file that holds (or would hold) k's state, "" without a disk
// tier. Tests use it to damage files.
func (s *Store) Path(k Key) string {
	if s.opt.Dir == "" {
		return ""
	}
	return filepath.Join(s.opt.Dir, k.file())
}

// Stats returns the store's sizes and counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.RAMEntries, st.RAMBytes = s.lru.Len(), s.ramBytes
	st.DiskFiles, st.DiskBytes = len(s.disk), s.diskUsed
	return st
}

// touch marks a disk file used now, on disk too so that recency survives a
// restart.
func (s *Store) touch(name string) {
	f, ok := s.disk[name]
	if !ok {
		return
	}
	now := time.Now()
	os.Chtimes(filepath.Join(s.opt.Dir, name), now, now)
	s.disk[name] = diskFile{size: f.size, used: now}
}

func (s *Store) putRAM(key string, e Entry) {
	if el, ok := s.ram[key]; ok {
		s.removeRAM(el)
	}
	if s.opt.RAMBytes < 0 || e.size() > s.opt.RAMBytes {
		return
	}
	s.ram[key] = s.lru.PushFront(&ramEntry{key, e})
	s.ramBytes += e.size()
	for s.ramBytes > s.opt.RAMBytes {
		s.removeRAM(s.lru.Back())
	}
}

func (s *Store) removeRAM(el *list.Element) {
	re := s.lru.Remove(el).(*ramEntry)
	delete(s.ram, re.key)
	s.ramBytes -= re.e.size()
}

// trimDisk deletes the least recently used files until the tier fits its
// budget, sparing keep (the file just written).
func (s *Store) trimDisk(keep string) {
	if s.diskUsed <= s.opt.DiskBytes {
		return
	}
	names := make([]string, 0, len(s.disk))
	for n := range s.disk {
		if n != keep {
			names = append(names, n)
		}
	}
	slices.SortFunc(names, func(a, b string) int { return s.disk[a].used.Compare(s.disk[b].used) })
	for _, n := range names {
		if s.diskUsed <= s.opt.DiskBytes {
			break
		}
		os.Remove(filepath.Join(s.opt.Dir, n))
		s.diskUsed -= s.disk[n].size
		delete(s.disk, n)
	}
}

func encode(key string, e Entry) []byte {
	toks := tokenBytes(e.Tokens)
	b := make([]byte, headerSize, headerSize+len(key)+len(toks)+len(e.Data))
	copy(b, magic)
	le := binary.LittleEndian
	le.PutUint32(b[8:], version)
	le.PutUint32(b[12:], uint32(len(key)))
	le.PutUint32(b[16:], uint32(len(e.Tokens)))
	le.PutUint64(b[24:], uint64(len(e.Data)))
	b = append(append(append(b, key...), toks...), e.Data...)
	sum := sha256.Sum256(b[headerSize:])
	copy(b[32:headerSize], sum[:])
	return b
}

// errBad marks a file that fails its checks.
var errBad = errors.New("invalid state file")

// decode checks b as a file stored under k and returns its entry.
func decode(b []byte, k Key) (Entry, error) {
	if len(b) < headerSize || string(b[:8]) != magic {
		return Entry{}, fmt.Errorf("%w: no header", errBad)
	}
	le := binary.LittleEndian
	if v := le.Uint32(b[8:]); v != version {
		return Entry{}, fmt.Errorf("%w: version %d, want %d", errBad, v, version)
	}
	keyLen, nTok, nData := uint64(le.Uint32(b[12:])), uint64(le.Uint32(b[16:])), le.Uint64(b[24:])
	if keyLen > maxKeyLen || nTok > maxTokens || nData > uint64(len(b)) ||
		uint64(len(b)) != headerSize+keyLen+4*nTok+nData {
		return Entry{}, fmt.Errorf("%w: lengths do not match the file's size", errBad)
	}
	if sum := sha256.Sum256(b[headerSize:]); string(sum[:]) != string(b[32:headerSize]) {
		return Entry{}, fmt.Errorf("%w: checksum mismatch", errBad)
	}
	body := b[headerSize:]
	if string(body[:keyLen]) != k.String() {
		return Entry{}, fmt.Errorf("%w: saved under another key", errBad)
	}
	tb := body[keyLen : keyLen+4*nTok]
	toks := make([]int, nTok)
	for i := range toks {
		toks[i] = int(le.Uint32(tb[4*i:]))
	}
	if HashTokens(toks) != k.Tokens {
		return Entry{}, fmt.Errorf("%w: tokens do not match the key", errBad)
	}
	return Entry{Tokens: toks, Data: body[keyLen+4*nTok:]}, nil
}

func readFile(path string, k Key) (Entry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Entry{}, err
	}
	return decode(b, k)
}

// writeAtomic writes b to path through a temporary file in the same folder
// and a rename, so a reader sees the old file or the new one, never half of
// one. It does not fsync: a file cut short by a power loss fails its
// checksum and is discarded, which costs one re-evaluation.
func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*"+tmpExt)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
