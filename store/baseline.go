package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"unicode"
)

// Baseline is the plain SQLite FTS5 retriever that Lore's BM25 is measured
// against (lore eval retrieval --baseline fts5): documents cut into
// 1,200-character chunks, FTS5 with porter stemming, the question's words
// ORed, documents ranked by their best chunk. It lives in memory and
// shares nothing with the library's index.
type Baseline struct {
	db *sql.DB
}

// baselineChunk is the chunk size of the baseline, in bytes.
const baselineChunk = 1200

// NewBaseline opens an empty baseline index.
func NewBaseline(ctx context.Context) (*Baseline, error) {
	db, err := sql.Open("sqlite3", "file::memory:")
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	db.SetMaxOpenConns(1) // one connection: one in-memory database
	if _, err := db.ExecContext(ctx, `CREATE VIRTUAL TABLE fts USING fts5(doc UNINDEXED, text, tokenize = 'porter unicode61')`); err != nil {
		db.Close()
		return nil, fmt.Errorf("baseline: %w", err)
	}
	return &Baseline{db: db}, nil
}

// Close frees the index.
func (b *Baseline) Close() error { return b.db.Close() }

// Add indexes a document's text under name.
func (b *Baseline) Add(ctx context.Context, name, text string) error {
	for len(text) > 0 {
		n := min(len(text), baselineChunk)
		if _, err := b.db.ExecContext(ctx, `INSERT INTO fts(doc, text) VALUES (?, ?)`, name, strings.ToValidUTF8(text[:n], "\uFFFD")); err != nil {
			return fmt.Errorf("baseline: add %s: %w", name, err)
		}
		text = text[n:]
	}
	return nil
}

// Search returns the names of the documents whose chunks best match the
// question's words, best first, at most limit chunks deep.
func (b *Baseline) Search(ctx context.Context, question string, limit int) ([]string, error) {
	var terms []string
	for _, w := range strings.FieldsFunc(strings.ToLower(question), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r)
	}) {
		terms = append(terms, `"`+w+`"`)
	}
	if len(terms) == 0 {
		return nil, nil
	}
	rows, err := b.db.QueryContext(ctx, `SELECT doc FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT ?`,
		strings.Join(terms, " OR "), limit)
	if err != nil {
		return nil, fmt.Errorf("baseline: search: %w", err)
	}
	defer rows.Close()
	var docs []string
	seen := map[string]bool{}
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, fmt.Errorf("baseline: search: %w", err)
		}
		if !seen[d] {
			seen[d] = true
			docs = append(docs, d)
		}
	}
	return docs, rows.Err()
}
