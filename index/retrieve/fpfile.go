package retrieve

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// The id file lists the chunk ids in a persisted graph with their vectors'
// fingerprints, sorted by id, all little-endian:
//
//	magic "LOREIDS\x00" | version u32 | reserved u32 | count u64
//	count × (id i64, fingerprint u64)
//
// Its SHA-256 is recorded in the store, so no checksum of its own.

const (
	fpMagic   = "LOREIDS\x00"
	fpVersion = 1
	fpHeader  = 24
	fpEntry   = 16
)

// fpFile writes fingerprints in the id file format (a vector.Saver, so that
// vector.SaveFile writes it atomically).
type fpFile map[int64]uint64

func (m fpFile) Save(w io.Writer) error {
	bw := bufio.NewWriter(w)
	var b [fpHeader]byte
	copy(b[:], fpMagic)
	binary.LittleEndian.PutUint32(b[8:], fpVersion)
	binary.LittleEndian.PutUint64(b[16:], uint64(len(m)))
	bw.Write(b[:])
	ids := make([]int64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		binary.LittleEndian.PutUint64(b[0:], uint64(id))
		binary.LittleEndian.PutUint64(b[8:], m[id])
		bw.Write(b[:fpEntry])
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write id file: %w", err)
	}
	return nil
}

// loadFPs reads an id file whose SHA-256 must be checksum.
func loadFPs(path, checksum string) (map[int64]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("id file: %w", err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != checksum {
		return nil, fmt.Errorf("id file %s: checksum mismatch", path)
	}
	if len(b) < fpHeader || string(b[:8]) != fpMagic {
		return nil, errors.New("id file: bad header")
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != fpVersion {
		return nil, fmt.Errorf("id file: version %d, want %d", v, fpVersion)
	}
	n := binary.LittleEndian.Uint64(b[16:])
	if rest := uint64(len(b) - fpHeader); rest%fpEntry != 0 || rest/fpEntry != n {
		return nil, fmt.Errorf("id file: %d bytes for %d entries", len(b), n)
	}
	m := make(map[int64]uint64, n)
	prev := int64(0)
	for i := range int(n) {
		e := b[fpHeader+i*fpEntry:]
		id := int64(binary.LittleEndian.Uint64(e))
		if i > 0 && id <= prev {
			return nil, errors.New("id file: ids out of order")
		}
		prev = id
		m[id] = binary.LittleEndian.Uint64(e[8:])
	}
	return m, nil
}
