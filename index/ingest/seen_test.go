package ingest

import (
	"archive/zip"
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lore/store"
)

// docxBytes is a small but whole Word document.
func docxBytes(t *testing.T, text string) []byte {
	t.Helper()
	var b bytes.Buffer
	z := zip.NewWriter(&b)
	for name, body := range map[string]string{
		"[Content_Types].xml": `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`,
		"word/document.xml":   `<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>` + text + `</w:t></w:r></w:p></w:body></w:document>`,
	} {
		w, err := z.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestEveryFileAccounted: every file the walk sees is listed: indexed, skipped with a
// reason, or a problem with its reason; never silently left out (issue 35, 15). A
// corrupt Word file is a problem; random bytes, with an extension or none, are skipped
// as binary. A second run changes nothing; a file turned binary loses its chunks; a
// skipped file deleted leaves the list.
func TestEveryFileAccounted(t *testing.T) {
	ctx := context.Background()
	ix, db := newIndexer(t, nil)
	dir := t.TempDir()
	rnd := rand.New(rand.NewPCG(1, 2))
	noise := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rnd.UintN(256))
		}
		return b
	}
	whole := docxBytes(t, "The quarterly report covers the harbour accounts.")
	tests := []struct {
		name   string
		data   []byte
		status store.Status
		reason string // in its error
	}{
		{"notes.md", []byte("# Notes\n\nThe harbour opens at nine.\n"), store.StatusIndexed, ""},
		{"report.docx", whole, store.StatusIndexed, ""},
		{"truncated.docx", whole[:len(whole)/2], store.StatusError, "corrupt or unreadable document"},
		{"headless.docx", append([]byte("PK\x03\x04"), noise(3000)...), store.StatusError, "corrupt or unreadable document"},
		{"noise.docx", noise(3000), store.StatusSkipped, "not text, PDF or Word"},
		{"random.bin", noise(4096), store.StatusSkipped, "not text, PDF or Word"},
		{"random", noise(2048), store.StatusSkipped, "not text, PDF or Word"},
		{"image.png", append([]byte("\x89PNG\r\n\x1a\n"), noise(500)...), store.StatusSkipped, "binary"},
		{"empty.txt", nil, store.StatusSkipped, "no text"},
	}
	for _, tt := range tests {
		if err := os.WriteFile(filepath.Join(dir, tt.name), tt.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	list := func() map[string]store.Document {
		t.Helper()
		ws, err := db.EnsureWorkspace(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		folders, err := db.Folders(ctx, ws.ID)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := db.DocumentsByFolder(ctx, folders[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]store.Document{}
		for _, d := range docs {
			out[d.Rel] = d
		}
		return out
	}
	generation := func() int64 {
		t.Helper()
		ws, _ := db.EnsureWorkspace(ctx, "main")
		g, err := db.Generation(ctx, ws.ID)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	var gen int64
	for run := 1; run <= 2; run++ {
		sum, err := ix.Run(ctx, "main", []string{dir}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		docs := list()
		for _, tt := range tests {
			d, ok := docs[tt.name]
			switch {
			case !ok:
				t.Errorf("run %d: %s is in no list: neither indexed, skipped nor a problem", run, tt.name)
			case d.Status != tt.status || !strings.Contains(d.Error, tt.reason) || (d.Status != store.StatusIndexed && d.Error == ""):
				t.Errorf("run %d: %s is %s %q, want %s with %q", run, tt.name, d.Status, d.Error, tt.status, tt.reason)
			}
		}
		if len(docs) != len(tests) {
			t.Errorf("run %d: %d documents listed for %d files", run, len(docs), len(tests))
		}
		if want := 5; sum.Skipped != want {
			t.Errorf("run %d: %d skipped, want %d: %+v", run, sum.Skipped, want, sum.SkippedFiles)
		}
		if run == 1 {
			gen = generation()
		} else if g := generation(); g != gen {
			t.Errorf("a second run over the same files moved the generation %d → %d", gen, g)
		}
	}

	// Turned binary: its chunks go, it is listed skipped. Deleted: it leaves the list.
	write(t, filepath.Join(dir, "notes.md"), string(noise(1000)))
	if err := os.Remove(filepath.Join(dir, "random.bin")); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Run(ctx, "main", []string{dir}, Options{}); err != nil {
		t.Fatal(err)
	}
	docs := list()
	if d := docs["notes.md"]; d.Status != store.StatusSkipped || !strings.Contains(d.Error, "binary") {
		t.Errorf("notes.md turned binary: %s %q, want skipped as binary", d.Status, d.Error)
	}
	if _, ok := docs["random.bin"]; ok {
		t.Error("a deleted skipped file is still listed")
	}
	ws, _ := db.EnsureWorkspace(ctx, "main")
	if hits, err := db.SearchBM25(ctx, ws.ID, "harbour nine", 5); err != nil || len(hits) != 1 || hits[0].Rel != "report.docx" {
		t.Errorf("search after notes.md turned binary = %+v, %v; want report.docx alone", hits, err)
	}
}
