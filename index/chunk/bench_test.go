//go:build unix

package chunk

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"lore/index/parse"
	"lore/index/walk"
)

// BenchmarkParseChunk walks, parses and chunks a generated folder of 2,000
// Markdown and text notes (2–8 KB each), as an index run would.
// go test -run '^$' -bench ParseChunk -benchtime 3x ./index/chunk
func BenchmarkParseChunk(b *testing.B) {
	dir := b.TempDir()
	rng := rand.New(rand.NewSource(7))
	var total int64
	for i := 0; i < 2000; i++ {
		var s strings.Builder
		name := fmt.Sprintf("notes/%02d/note%04d.md", i%40, i)
		if i%2 == 1 {
			name = fmt.Sprintf("notes/%02d/log%04d.txt", i%40, i)
		} else {
			fmt.Fprintf(&s, "# Note %d\n\n", i)
		}
		for sec := 0; sec < 1+rng.Intn(5); sec++ {
			if i%2 == 0 {
				fmt.Fprintf(&s, "## Part %d\n\n", sec)
			}
			for p := 0; p < 1+rng.Intn(4); p++ {
				s.WriteString(prose(rng, 3+rng.Intn(8)) + "\n\n")
			}
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s.String()), 0o644); err != nil {
			b.Fatal(err)
		}
		total += int64(s.Len())
	}
	p := parse.New(parse.Options{})
	defer p.Close()
	ctx := context.Background()
	chunks, files := 0, 0
	b.SetBytes(total)
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		err := walk.Walk(ctx, dir, walk.Options{}, func(f walk.File) error {
			doc, err := p.Parse(ctx, f.Path)
			if err != nil {
				return err
			}
			chunks += len(Split(doc, Options{}))
			files++
			return nil
		}, func(path string, err error) { b.Errorf("%s: %v", path, err) })
		if err != nil {
			b.Fatal(err)
		}
	}
	sec := b.Elapsed().Seconds()
	// The machine may be shared: CPU time says what the work costs.
	b.ReportMetric(float64(chunks)/(cpuTime()-cpu0), "chunks/cpu-s")
	b.ReportMetric(float64(chunks)/sec, "chunks/s")
	b.ReportMetric(float64(files)/sec, "files/s")
	b.ReportMetric(float64(chunks)/float64(files), "chunks/file")
}

// BenchmarkSplitPathological reports chunking throughput on each shape at
// 20 MB (the size of the Markdown file that once hung indexing).
// go test -run '^$' -bench SplitPathological -benchtime 1x ./index/chunk
func BenchmarkSplitPathological(b *testing.B) {
	for _, sh := range shapes() {
		b.Run(sh.name, func(b *testing.B) {
			doc := shapeDoc(sh.make(20 << 20))
			b.SetBytes(int64(len(doc.Sections[0].Text)))
			cpu0 := cpuTime()
			n := 0
			for b.Loop() {
				n = len(Split(doc, Options{}))
			}
			b.ReportMetric(float64(b.N)*float64(len(doc.Sections[0].Text))/1e6/(cpuTime()-cpu0), "MB/cpu-s")
			b.ReportMetric(float64(n), "chunks")
		})
	}
}

// cpuTime is the process's user+system CPU seconds so far.
func cpuTime() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
