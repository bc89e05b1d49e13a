package store

import (
	"context"
	"database/sql"
	"fmt"
)

// SearchBM25Reference is the straightforward search the optimised RankBM25 (through SearchBM25) must agree
// with: every query word ORed, the whole match joined to chunks and documents, then
// ranked. It is the correctness reference for tests and the "before" of the benchmark.
func (db *DB) SearchBM25Reference(ctx context.Context, ws int64, query string, limit int) ([]Hit, error) {
	q := MatchQuery(query)
	if q == "" {
		return nil, nil
	}
	rows, err := db.r.QueryContext(ctx, `SELECT c.id, d.id, d.path, d.rel, d.title, c.ordinal, c.text, c.heading,
			c.page, c.line_start, c.line_end, bm25(chunks_fts) AS score
		FROM chunks_fts
		JOIN chunks c ON c.id = chunks_fts.rowid
		JOIN documents d ON d.id = c.document_id
		WHERE chunks_fts MATCH ? AND d.workspace_id = ?
		ORDER BY score LIMIT ?`, q, ws, limit)
	if err != nil {
		return nil, fmt.Errorf("store: search: %w", err)
	}
	defer rows.Close()
	var out []Hit
	for rows.Next() {
		var h Hit
		if err := rows.Scan(&h.ChunkID, &h.DocumentID, &h.Path, &h.Rel, &h.Title, &h.Ordinal, &h.Text, &h.Heading,
			&h.Page, &h.LineStart, &h.LineEnd, &h.Score); err != nil {
			return nil, err
		}
		h.Score = -h.Score
		out = append(out, h)
	}
	return out, rows.Err()
}

// Internals for the external test package (store_test), which can import lore/index/retrieve
// for its synthetic corpus.
var (
	MatchExpr = matchExpr
	RankFirst = (*DB).rankFirst
)

// Plan exposes RankBM25's plan for a query's words.
func (db *DB) Plan(ctx context.Context, words []string, limit int) (searched, rare, common []string, bound float64) {
	p := db.plan(ctx, words, limit)
	return p.words, p.rare, p.common, p.bound
}

// ReferenceScore is one chunk's score (as Hit.Score) under the straightforward query, and
// whether that query finds the chunk in workspace ws at all.
func (db *DB) ReferenceScore(ctx context.Context, ws int64, query string, chunkID int64) (float64, bool, error) {
	var bm25 float64
	err := db.r.QueryRowContext(ctx, `SELECT bm25(chunks_fts) FROM chunks_fts
		JOIN chunks c ON c.id = chunks_fts.rowid
		JOIN documents d ON d.id = c.document_id
		WHERE chunks_fts MATCH ? AND chunks_fts.rowid = ? AND d.workspace_id = ?`, MatchQuery(query), chunkID, ws).Scan(&bm25)
	if err == sql.ErrNoRows {
		return 0, false, nil
	}
	return -bm25, err == nil, err
}
