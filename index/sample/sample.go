// Package sample holds Lore's sample library: about thirty short documents
// written for the project (a fictional map company's staff handbook, meeting
// minutes, home projects, recipes, travel plans, technical notes on Go, SQLite
// and HTTP, a few HTML pages and Go source files) and a set of labelled
// questions about them.
//
// It serves three purposes:
//
//   - the demo: `lore demo` writes the library with WriteCorpus, indexes it
//     and asks a question about it, so Lore can be tried with nothing but the
//     binary;
//   - retrieval evaluation: `lore eval retrieval --queries FILE` scores a
//     workspace that indexed the library against the questions in Queries;
//   - tests that need a realistic, mixed-format folder and a measure of
//     search quality.
//
// The topics overlap on purpose (holidays in the handbook, the itinerary and
// the household budget; the shed's solar battery powering the irrigation
// controller; SQLite in the tech notes and in the minutes) so that retrieval
// is not trivial, and many questions are paraphrases that share few words with
// their answers.
package sample

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

//go:embed corpus queries.jsonl
var files embed.FS

// WriteCorpus writes the sample library into dir, creating dir and its
// folders as needed. Files that already hold the same content are left
// untouched, so rewriting the library over an indexed copy keeps it unchanged
// for the indexer; files with other content are overwritten, and files that
// are not part of the library are left alone.
func WriteCorpus(dir string) error {
	root, err := fs.Sub(files, "corpus")
	if err != nil {
		return err
	}
	return fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if d.IsDir() {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return fmt.Errorf("sample: %w", err)
			}
			return nil
		}
		b, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, b) {
			return nil
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return fmt.Errorf("sample: %w", err)
		}
		return nil
	})
}

// Queries returns the labelled questions about the library, as JSON lines of
// {"query": "...", "relevant": ["folder/file.md", ...]}, where each relevant
// path is relative to the folder WriteCorpus wrote, with forward slashes. This
// is the format `lore eval retrieval` reads.
func Queries() []byte {
	b, err := files.ReadFile("queries.jsonl")
	if err != nil {
		panic(err) // embedded at build time
	}
	return b
}
