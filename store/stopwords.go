package store

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
)

// stopWeight is how much a question's stopwords count in a chunk's score, relative to
// its other words: each adds stopWeight times the bm25 term FTS5 would give it.
//
// Leaving stopwords out of the search (for speed, see splitQuery) also left out what they
// say: "doesn't answer", "where do I", "what should I try" match the sentences a document
// answers with. Searched in full, they found the right document in the top 5 more often
// on the sample library (recall@5 0.870 → 0.906) but ranked worse elsewhere (MRR −0.02
// on the Python sources and −0.014 on the sysman pages); at half weight, and only on the
// chunks the other words found, recall@5 rose as much and MRR rose or held on every
// tuning set (lore eval retrieval, eval/README.md; README "Retrieval quality").
const stopWeight = 0.5

// bm25B is FTS5's bm25 length normalisation (fts5_aux.c), beside bm25K1.
const bm25B = 0.75

// weighStopwords adds to each ranked chunk stopWeight times the bm25 score the stopwords
// would have given it, and orders the chunks again (best first, ties by id). FTS5
// cannot score them cheaply: its bm25 walks each word's whole posting list for the
// IDF, once per lookup, and a stopword's list holds most chunks. So the score is
// computed here, exactly as FTS5's bm25 does: the IDF from the cached document
// frequencies (termStats), the term counts by tokenizing the chunks' text and heading
// with the index's own tokenizer, the chunk and average lengths from FTS5's own records.
// A failure leaves the ranking as it was: this refines it, nothing depends on it.
func (db *DB) weighStopwords(ctx context.Context, stops []string, out []Ranked) []Ranked {
	if len(stops) == 0 || len(out) == 0 {
		return out
	}
	add, err := db.stopScores(ctx, stops, out)
	if err != nil {
		return out
	}
	for i := range out {
		out[i].Score += stopWeight * add[i]
	}
	slices.SortStableFunc(out, func(a, b Ranked) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.ChunkID, b.ChunkID)
	})
	return out
}

// stopScores returns, for each chunk of rs, the bm25 score (higher is better) that an
// FTS5 query of the words alone would give it.
func (db *DB) stopScores(ctx context.Context, words []string, rs []Ranked) ([]float64, error) {
	toks, err := db.terms.tokens(ctx, words)
	if err != nil {
		return nil, err
	}
	// A word that is not one index term is left out, as plan does with its counts.
	seen := map[string]bool{}
	var terms []string
	for _, t := range toks {
		if len(t) == 1 && !seen[t[0]] {
			seen[t[0]] = true
			terms = append(terms, t[0])
		}
	}
	if len(terms) == 0 {
		return make([]float64, len(rs)), nil
	}
	n, df, err := db.termStats(ctx, terms)
	if err != nil {
		return nil, err
	}
	avg, err := db.avgChunkLength(ctx)
	if err != nil {
		return nil, err
	}

	ids := make([]any, len(rs))
	at := make(map[int64]int, len(rs))
	for i, r := range rs {
		ids[i] = r.ChunkID
		at[r.ChunkID] = i
	}
	texts := make([]string, len(rs))
	lengths := make([]float64, len(rs))
	const batch = 500 // under SQLite's variable limit
	for start := 0; start < len(ids); start += batch {
		part := ids[start:min(start+batch, len(ids))]
		rows, err := db.r.QueryContext(ctx, `SELECT c.id, c.text, c.heading, s.sz FROM chunks c
			JOIN chunks_fts_docsize s ON s.id = c.id
			WHERE c.id IN (?`+strings.Repeat(",?", len(part)-1)+`)`, part...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id int64
			var text, heading string
			var sz []byte
			if err := rows.Scan(&id, &text, &heading, &sz); err != nil {
				rows.Close()
				return nil, err
			}
			i := at[id]
			// Each column tokenized alone, as the index did: text and heading counts add.
			texts[i] = text + "\n" + heading
			for len(sz) > 0 {
				v, k := getVarint(sz)
				if k == 0 {
					break
				}
				lengths[i] += float64(v)
				sz = sz[k:]
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	tf, err := db.terms.count(ctx, texts, terms)
	if err != nil {
		return nil, err
	}
	scores := make([]float64, len(rs))
	for _, t := range terms {
		f := float64(df[t])
		idf := max(math.Log((float64(n)-f+0.5)/(f+0.5)), 1e-6)
		for i := range rs {
			if c := float64(tf[i][t]); c > 0 {
				scores[i] += idf * c * (bm25K1 + 1) / (c + bm25K1*(1-bm25B+bm25B*lengths[i]/avg))
			}
		}
	}
	return scores, nil
}

// avgChunkLength is the average number of tokens in a row of the FTS index, all
// columns together, from its averages record (as FTS5's bm25 computes it).
func (db *DB) avgChunkLength(ctx context.Context) (float64, error) {
	var rec []byte
	if err := db.r.QueryRowContext(ctx, `SELECT block FROM chunks_fts_data WHERE id = 1`).Scan(&rec); err != nil {
		return 0, err
	}
	rows, k := getVarint(rec)
	if k == 0 || rows == 0 {
		return 0, errors.New("store: empty FTS averages record")
	}
	rec = rec[k:]
	var total uint64
	for len(rec) > 0 {
		v, k := getVarint(rec)
		if k == 0 {
			return 0, errors.New("store: bad FTS averages record")
		}
		total += v
		rec = rec[k:]
	}
	return float64(total) / float64(rows), nil
}

// getVarint decodes SQLite's variable-length integer (big-endian groups of 7 bits, a
// ninth byte of 8), which FTS5 uses in its records. It returns the value and the bytes
// read, 0 when b is cut short.
func getVarint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < 9; i++ {
		if i == len(b) {
			return 0, 0
		}
		if i == 8 {
			return v<<8 | uint64(b[i]), 9
		}
		v = v<<7 | uint64(b[i]&0x7f)
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	return v, 9
}

// count returns, for each text, how many of its tokens are each of terms (index terms,
// as tokens returns them), tokenized as the index does.
func (t *tokenizer) count(ctx context.Context, texts []string, terms []string) ([]map[string]int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out, err := t.countLocked(ctx, texts, terms)
	if err != nil && t.conn != nil {
		t.conn.Close()
		t.db.Close()
		t.db, t.conn = nil, nil
	}
	return out, err
}

func (t *tokenizer) countLocked(ctx context.Context, texts []string, terms []string) ([]map[string]int, error) {
	if err := t.open(ctx); err != nil {
		return nil, err
	}
	if _, err := t.conn.ExecContext(ctx, `INSERT INTO tok(tok) VALUES ('delete-all')`); err != nil {
		return nil, err
	}
	const batch = 250 // rows per INSERT, two variables each
	for start := 0; start < len(texts); start += batch {
		part := texts[start:min(start+batch, len(texts))]
		args := make([]any, 0, 2*len(part))
		for j, s := range part {
			args = append(args, start+j+1, s)
		}
		if _, err := t.conn.ExecContext(ctx, `INSERT INTO tok(rowid, w) VALUES (?, ?)`+
			strings.Repeat(", (?, ?)", len(part)-1), args...); err != nil {
			return nil, err
		}
	}
	out := make([]map[string]int, len(texts))
	for i := range out {
		out[i] = map[string]int{}
	}
	for _, term := range terms {
		rows, err := t.conn.QueryContext(ctx, `SELECT doc, count(*) FROM tok_instance WHERE term = ? GROUP BY doc`, term)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var doc, c int
			if err := rows.Scan(&doc, &c); err != nil {
				rows.Close()
				return nil, err
			}
			if doc >= 1 && doc <= len(texts) {
				out[doc-1][term] = c
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
