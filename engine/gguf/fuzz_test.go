package gguf

import (
	"errors"
	"testing"
)

// FuzzRead checks that no input makes Read panic, that every failure is one of
// the classified errors, and that whatever parses is internally consistent.
func FuzzRead(f *testing.F) {
	f.Add(small(f))
	f.Add([]byte{})
	f.Add([]byte("GGUF"))
	f.Add(header(3, 1, 1).str("k").u32(9).u32(8).u64(2).str("a").str("b").str("t").u32(2).u64(32).u64(1).u32(2).u64(0).pad(64).Bytes())
	f.Add(header(2, 0, 2).str("general.alignment").u32(4).u32(64).str("n").u32(9).u32(9).u64(1).u32(5).u64(1).u32(7).Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := read(data)
		if err != nil {
			if !errors.Is(err, ErrNotGGUF) && !errors.Is(err, ErrTruncated) &&
				!errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		for _, ti := range file.Tensors {
			end := uint64(file.DataOffset) + ti.Offset + ti.Bytes()
			if end > uint64(len(data)) || ti.Offset%file.Alignment != 0 || len(ti.Dims) > MaxDims {
				t.Fatalf("accepted bad tensor %+v (data offset %d, size %d)", ti, file.DataOffset, len(data))
			}
		}
		in := file.Info()
		_ = in.EstimateRAM(4096)
		_ = in.EstimateRAM(0)
	})
}
