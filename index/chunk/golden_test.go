package chunk

import (
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/split.golden from the current splitter")

// TestSplitGolden pins chunk boundaries: the chunks of every test document and
// pathological shape, under several options, must hash to what they did when
// the file was written (by the splitter before it was made linear). A change
// here changes every index built: rewrite the file with -update only on purpose.
func TestSplitGolden(t *testing.T) {
	got := map[string]string{}
	add := func(name string, chunks []Chunk) {
		b, err := json.Marshal(chunks)
		if err != nil {
			t.Fatal(err)
		}
		got[name] = fmt.Sprintf("%x", sha256.Sum256(b))
	}
	for dname, doc := range testDocs() {
		for cname, count := range counters() {
			for _, opt := range []Options{{}, {Target: 64, Overlap: 16}, {Target: 40, Overlap: -1}, {Target: 512, Overlap: 64}, {Target: 16, Overlap: 8}} {
				opt.Count = count
				add(fmt.Sprintf("%s/%s/%d/%d", dname, cname, opt.Target, opt.Overlap), Split(doc, opt))
			}
		}
	}
	for _, sh := range shapes() {
		doc := shapeDoc(sh.make(64 << 10))
		for cname, count := range counters() {
			for _, opt := range []Options{{}, {Target: 64, Overlap: 16}, {Target: 128, Overlap: -1}} {
				opt.Count = count
				add(fmt.Sprintf("shape %s/%s/%d/%d", sh.name, cname, opt.Target, opt.Overlap), Split(doc, opt))
			}
		}
	}
	path := filepath.Join("testdata", "split.golden")
	if *update {
		b, _ := json.MarshalIndent(got, "", "\t")
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]string
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("%d cases, golden file has %d", len(got), len(want))
	}
	for name, h := range want {
		if got[name] != h {
			t.Errorf("%s: chunks changed", name)
		}
	}
}
