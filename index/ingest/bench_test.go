package ingest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkRunFresh indexes 1,000 small files into an empty store (no embedder).
func BenchmarkRunFresh(b *testing.B) {
	root := b.TempDir()
	for i := range 1000 {
		path := filepath.Join(root, fmt.Sprintf("d%02d", i%20), fmt.Sprintf("f%04d.md", i))
		os.MkdirAll(filepath.Dir(path), 0o755)
		os.WriteFile(path, []byte(fmt.Sprintf("# Note %d\n\nSome text about item %d and its neighbours.\n", i, i)), 0o644)
	}
	for b.Loop() {
		b.StopTimer()
		ix, _ := newIndexer(b, nil)
		b.StartTimer()
		sum, err := ix.Run(context.Background(), "b", []string{root}, Options{})
		if err != nil || sum.Indexed != 1000 {
			b.Fatal(sum, err)
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "files/s")
}

// BenchmarkRunUnchanged re-scans 1,000 indexed, unchanged files.
func BenchmarkRunUnchanged(b *testing.B) {
	root := b.TempDir()
	for i := range 1000 {
		path := filepath.Join(root, fmt.Sprintf("d%02d", i%20), fmt.Sprintf("f%04d.md", i))
		os.MkdirAll(filepath.Dir(path), 0o755)
		os.WriteFile(path, []byte(fmt.Sprintf("# Note %d\n\nSome text about item %d.\n", i, i)), 0o644)
	}
	ix, _ := newIndexer(b, nil)
	if _, err := ix.Run(context.Background(), "b", []string{root}, Options{}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		sum, err := ix.Run(context.Background(), "b", []string{root}, Options{})
		if err != nil || sum.Unchanged != 1000 {
			b.Fatal(sum, err)
		}
	}
}
