package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode"
)

// Hit is a chunk found by a search or fetched by id.
type Hit struct {
	ChunkID    int64   `json:"chunk_id"`
	DocumentID int64   `json:"document_id"`
	Path       string  `json:"path"`
	Rel        string  `json:"rel"`
	Title      string  `json:"title,omitempty"`
	Ordinal    int     `json:"ordinal"`
	Text       string  `json:"text"`
	Heading    string  `json:"heading,omitempty"`
	Page       int     `json:"page,omitempty"`
	LineStart  int     `json:"line_start,omitempty"`
	LineEnd    int     `json:"line_end,omitempty"`
	Score      float64 `json:"score"` // -bm25: higher is better; 0 for ChunkTexts
}

// maxTerms bounds the OR query: each term adds a posting-list scan.
const maxTerms = 32

// SearchBM25 is RankBM25 with each chunk's text and location, best first.
func (db *DB) SearchBM25(ctx context.Context, ws int64, query string, limit int) ([]Hit, error) {
	ranked, err := db.RankBM25(ctx, ws, query, limit)
	if err != nil || len(ranked) == 0 {
		return nil, err
	}
	hits, err := db.ChunkTexts(ctx, chunkIDs(ranked))
	if err != nil {
		return nil, fmt.Errorf("store: search: %w", err)
	}
	score := make(map[int64]float64, len(ranked))
	for _, r := range ranked {
		score[r.ChunkID] = r.Score
	}
	for i := range hits {
		hits[i].Score = score[hits[i].ChunkID]
	}
	return hits, nil
}

// Ranked is a chunk placed by a search, without its text.
type Ranked struct {
	ChunkID  int64
	Document int64
	Score    float64 // -bm25: higher is better
}

func chunkIDs(rs []Ranked) []int64 {
	ids := make([]int64, len(rs))
	for i, r := range rs {
		ids[i] = r.ChunkID
	}
	return ids
}

// RankBM25 ranks the workspace's chunks against the user's text with FTS5's bm25. The
// text is never passed to FTS5 as query syntax: it is split into words, each quoted as a
// string literal, stopwords dropped when other words remain, and the rest ORed. Text
// without any word returns no hits and no error.
//
// bm25 is computed for every chunk that matches any word, which is slow when a word is
// common (NOTES: 173 ms at 100k chunks with one word found in three chunks of four,
// against 3.8 ms without). So, looking up how many chunks hold each word (see plan):
//   - Words found in at least half of all chunks are left out when another word is found
//     somewhere. FTS5's IDF for them is 1e-6, so leaving them out moves no score by more
//     than ~2e-6; what it loses is the chunks that hold nothing but such words, which
//     scored ~1e-6.
//   - Other common words are only scored in chunks that also hold a rarer word, the
//     rest of the chunks that hold them being ranked below the results by an upper
//     bound on what these words can add. When that bound does not hold, the words are
//     searched like any other: results do not change.
//   - Chunks are ranked inside FTS5 first, and only the best few are looked up to keep
//     the workspace's (see rankFirst): joining every match to its document before the
//     ORDER BY cost three times the ranking itself.
//
// The question's stopwords then add half their bm25 to the chunks found (see
// weighStopwords): they never bring in a chunk of their own.
//
// It returns chunk ids and scores only: hybrid retrieval fuses two ranked lists and
// fetches the texts of the few passages it keeps.
func (db *DB) RankBM25(ctx context.Context, ws int64, query string, limit int) ([]Ranked, error) {
	words, stops := splitQuery(query)
	if len(words) == 0 {
		return nil, nil
	}
	if limit <= 0 {
		limit = 20
	}
	p := db.plan(ctx, words, limit)
	var out []Ranked
	var err error
	if len(p.common) > 0 {
		rare, common := "("+matchExpr(p.rare)+")", "("+matchExpr(p.common)+")"
		out, err = db.rankFirst(ctx, ws, limit, rare+" AND "+common, rare+" NOT "+common)
		if err != nil {
			return nil, fmt.Errorf("store: search: %w", err)
		}
		// Chunks with common words only score at most p.bound: the results stand if
		// they fill the limit above it. (The margin covers statistics a concurrent
		// write made stale.)
		if len(out) < limit || out[limit-1].Score <= p.bound*1.05 {
			out = nil
		}
	}
	if out == nil {
		out, err = db.rankFirst(ctx, ws, limit, matchExpr(p.words))
		if err != nil {
			return nil, fmt.Errorf("store: search: %w", err)
		}
	}
	return db.weighStopwords(ctx, stops, out), nil
}

// searchPlan is how RankBM25 searches for a query's words.
type searchPlan struct {
	words []string // the words searched, maybe fewer than asked
	// When common is set, chunks holding a rare word are ranked first, scored by all
	// words, and no chunk holding only common words scores more than bound.
	rare, common []string
	bound        float64
}

// minSparedRows is how many chunk matches a plan must spare scoring before it leaves
// words out or splits them: below that, scoring them is cheap, and in a small corpus,
// where "half of all chunks" is a handful, every match stays in the results.
const minSparedRows = 1000

// FTS5's bm25 parameters (fts5_aux.c).
const bm25K1 = 1.2

// plan decides which of the query's words to search and how, from how many chunks of
// the index hold each (FTS5's own IDF statistics, shared by all workspaces). Words are
// looked up as the index stores them (porter stems, see tokenizer); a word that is not
// exactly one index term is searched as it is. On any error, all words are searched.
func (db *DB) plan(ctx context.Context, words []string, limit int) searchPlan {
	p := searchPlan{words: words}
	if len(words) < 2 {
		return p
	}
	toks, err := db.terms.tokens(ctx, words)
	if err != nil {
		return p
	}
	var terms []string
	for _, t := range toks {
		if len(t) == 1 {
			terms = append(terms, t[0])
		}
	}
	n, df, err := db.termStats(ctx, terms)
	if err != nil {
		return p
	}
	// count is how many chunks hold word i, or -1 when unknown.
	count := func(i int) int64 {
		if len(toks[i]) != 1 {
			return -1
		}
		return df[toks[i][0]]
	}
	// bm25's IDF, which it floors at 1e-6 for words in half the chunks or more.
	idf := func(f int64) float64 {
		return max(math.Log((float64(n)-float64(f)+0.5)/(float64(f)+0.5)), 1e-6)
	}

	// Leave out words in half the chunks or more, if another word is found somewhere.
	var keep []int
	var spared int64
	found := false
	for i := range words {
		if f := count(i); f >= 0 && 2*f >= n {
			spared += f
			continue
		} else if f > 0 {
			found = true
		}
		keep = append(keep, i)
	}
	if found && spared >= minSparedRows {
		p.words = nil
		for _, i := range keep {
			p.words = append(p.words, words[i])
		}
	} else {
		keep = make([]int, len(words))
		for i := range keep {
			keep[i] = i
		}
	}

	// Split off the commonest remaining words while the rarer ones, scored in full,
	// can likely fill the results above the bound on what the common ones add:
	// tf*(k1+1)/(tf+...) < k1+1, so a word adds less than idf*(k1+1) to any chunk (FTS5
	// sums a phrase's frequencies over the columns before saturating them, so this holds
	// with the heading column too), and one occurrence of a word in a chunk of average
	// length adds idf.
	if len(keep) < 2 {
		return p
	}
	slices.SortStableFunc(keep, func(a, b int) int { return cmp.Compare(count(b), count(a)) })
	var rareRows int64
	for _, i := range keep {
		rareRows += max(count(i), 0)
	}
	split, bound := 0, 0.0
	var commonRows int64
	for j, i := range keep[:len(keep)-1] {
		f := count(i)
		next := count(keep[j+1]) // the commonest word left among the rare ones
		b := bound + idf(f)*(bm25K1+1)
		if f < 0 || next <= 0 || rareRows-f < int64(2*limit) || b > 0.5*idf(next) {
			break
		}
		split, bound, rareRows, commonRows = j+1, b, rareRows-f, commonRows+f
	}
	if split == 0 || commonRows < minSparedRows {
		return p
	}
	for j, i := range keep {
		if j < split {
			p.common = append(p.common, words[i])
		} else {
			p.rare = append(p.rare, words[i])
		}
	}
	p.bound = bound
	return p
}

// rankRounds are the cut-offs, as multiples of the limit, at which rankFirst ranks all
// matches inside FTS5 before keeping the workspace's. The FTS table is shared by all
// workspaces, so the best matches may belong to others.
var rankRounds = []int{2, 32}

// rankFirst returns the ids and bm25 scores of the workspace's best limit chunks that
// match any of the FTS5 MATCH expressions, best first, ties by chunk id. Expressions
// must not match the same chunk twice. It ranks all matches inside FTS5, keeps the best
// few and only then looks up which workspace each belongs to. When fewer than limit of
// those are the workspace's while more matches exist, it tries a deeper cut, then ranks
// only the workspace's matches, which is exact but joins every match (the slow plan).
func (db *DB) rankFirst(ctx context.Context, ws int64, limit int, exprs ...string) ([]Ranked, error) {
	var ranked, mine []string
	args := []any{sql.Named("ws", ws)}
	for i, e := range exprs {
		args = append(args, sql.Named(fmt.Sprintf("m%d", i), e))
		ranked = append(ranked, fmt.Sprintf(`SELECT * FROM (SELECT rowid AS id, bm25(chunks_fts) AS score
			FROM chunks_fts WHERE chunks_fts MATCH :m%d ORDER BY score, rowid LIMIT :k)`, i))
		mine = append(mine, fmt.Sprintf(`SELECT chunks_fts.rowid AS id, bm25(chunks_fts) AS score, c.document_id, 1
			FROM chunks_fts
			JOIN chunks c ON c.id = chunks_fts.rowid
			JOIN documents d ON d.id = c.document_id
			WHERE chunks_fts MATCH :m%d AND d.workspace_id = :ws`, i))
	}
	for _, m := range rankRounds {
		k := limit
		if limit <= math.MaxInt32 {
			k = m * limit
		}
		// LEFT JOINs so that every ranked row comes back and counts towards k.
		rows, err := db.r.QueryContext(ctx, `SELECT t.id, t.score, ifnull(d.id, 0), ifnull(d.workspace_id = :ws, 0)
			FROM (SELECT * FROM (`+strings.Join(ranked, " UNION ALL ")+`) ORDER BY score, id LIMIT :k) t
			LEFT JOIN chunks c ON c.id = t.id
			LEFT JOIN documents d ON d.id = c.document_id
			ORDER BY t.score, t.id`, append(args, sql.Named("k", k))...)
		if err != nil {
			return nil, err
		}
		out, n, err := scanRanked(rows, limit)
		if err != nil {
			return nil, err
		}
		if len(out) == limit || n < k {
			return out, nil
		}
	}
	rows, err := db.r.QueryContext(ctx, strings.Join(mine, " UNION ALL ")+` ORDER BY score, id LIMIT :limit`,
		append(args, sql.Named("limit", limit))...)
	if err != nil {
		return nil, err
	}
	out, _, err := scanRanked(rows, limit)
	return out, err
}

// scanRanked reads (id, score, document, mine) rows and keeps the first limit that are
// mine, returning how many rows it read. Scores come back as -bm25.
func scanRanked(rows *sql.Rows, limit int) (out []Ranked, n int, err error) {
	defer rows.Close()
	for rows.Next() {
		var r Ranked
		var mine bool
		if err := rows.Scan(&r.ChunkID, &r.Score, &r.Document, &mine); err != nil {
			return nil, 0, err
		}
		n++
		if mine {
			r.Score = -r.Score
			if out = append(out, r); len(out) == limit {
				break
			}
		}
	}
	return out, n, rows.Err()
}

// MatchQuery turns free text into a safe FTS5 MATCH expression: an OR of quoted words,
// or "" when the text has no words. Words are runs of letters and numbers, as FTS5's
// unicode61 tokenizer sees them, so operators, column filters, prefixes and parentheses
// in the input are just separators.
func MatchQuery(text string) string {
	return matchExpr(QueryWords(text))
}

// matchExpr ORs words, each quoted as an FTS5 string.
func matchExpr(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = `"` + strings.ReplaceAll(w, `"`, `""`) + `"`
	}
	return strings.Join(quoted, " OR ")
}

// QueryWords splits text into the distinct lower-case words MatchQuery searches
// for: its words without the stopwords (unless it has nothing else).
func QueryWords(text string) []string {
	words, _ := splitQuery(text)
	return words
}

// ContentWords splits text into its lower-case words as QueryWords does and leaves
// out the stopwords: every other word, repeats included, in order, with no cap.
// A sentence of stopwords alone has none.
func ContentWords(text string) []string {
	var out []string
	for _, w := range lowerWords(text) {
		if !stopwords[w] {
			out = append(out, w)
		}
	}
	return out
}

// lowerWords splits text into lower-case runs of letters and numbers, as FTS5's
// unicode61 tokenizer sees words.
func lowerWords(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r) && !unicode.Is(unicode.Mn, r)
	})
}

// splitQuery splits text into the distinct lower-case words searched for and the
// stopwords left out of them (none when only stopwords were found: then they are the
// words searched).
func splitQuery(text string) (words, stops []string) {
	all := lowerWords(text)
	seen := make(map[string]bool, len(all))
	var keep []string
	for _, w := range all {
		if seen[w] {
			continue
		}
		seen[w] = true
		if stopwords[w] {
			stops = append(stops, w)
		} else {
			keep = append(keep, w)
		}
	}
	// Stopwords match most rows and bm25 scores every match (NOTES: 173 ms vs 3.8 ms
	// at 100k chunks), so they are only searched when nothing else is left; otherwise
	// they only weigh in on the chunks found (weighStopwords).
	if len(keep) == 0 {
		keep, stops = stops, nil
	}
	if len(keep) > maxTerms {
		keep = keep[:maxTerms]
	}
	if len(stops) > maxTerms {
		stops = stops[:maxTerms]
	}
	return keep, stops
}

// termStats returns the number of chunks in the FTS index and, for each term, the number
// that contain it. fts5vocab counts those by walking the term's whole posting list (about
// 2 ms for a term in most of 100k chunks), so counts are cached until the index changes.
func (db *DB) termStats(ctx context.Context, terms []string) (int64, map[string]int64, error) {
	// Every write to the index rewrites its averages record (row count and total
	// tokens, id 1) or its structure record (segments and write counter, id 10), or
	// both; together they identify the index's state.
	var avg, structure []byte
	if err := db.r.QueryRowContext(ctx, `SELECT (SELECT block FROM chunks_fts_data WHERE id = 1),
			(SELECT block FROM chunks_fts_data WHERE id = 10)`).Scan(&avg, &structure); err != nil {
		return 0, nil, err
	}
	version := string(avg) + "\x00" + string(structure)
	c := &db.stats

	c.mu.Lock()
	if c.version != version {
		c.version, c.n, c.df = version, -1, map[string]int64{}
	}
	n := c.n
	df := make(map[string]int64, len(terms))
	var missing []any
	for _, t := range terms {
		if f, ok := c.df[t]; ok {
			df[t] = f
		} else if _, dup := df[t]; !dup {
			df[t] = 0
			missing = append(missing, t)
		}
	}
	c.mu.Unlock()

	if n < 0 {
		if err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM chunks_fts_docsize`).Scan(&n); err != nil {
			return 0, nil, err
		}
	}
	if len(missing) > 0 {
		rows, err := db.r.QueryContext(ctx, `SELECT term, doc FROM chunks_fts_vocab
			WHERE term IN (?`+strings.Repeat(",?", len(missing)-1)+`)`, missing...)
		if err != nil {
			return 0, nil, err
		}
		for rows.Next() {
			var t string
			var f int64
			if err := rows.Scan(&t, &f); err != nil {
				rows.Close()
				return 0, nil, err
			}
			df[t] = f
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return 0, nil, err
		}
	}

	c.mu.Lock()
	if c.version == version { // else the index changed meanwhile: these counts may be stale
		c.n = n
		if len(c.df)+len(missing) > maxCachedTerms {
			c.df = map[string]int64{}
		}
		for _, t := range missing {
			c.df[t.(string)] = df[t.(string)]
		}
	}
	c.mu.Unlock()
	return n, df, nil
}

const maxCachedTerms = 1 << 16

// termStatsCache holds one database's FTS statistics for one state of its index.
type termStatsCache struct {
	mu      sync.Mutex
	version string
	n       int64 // chunks in the index; -1 when not yet counted
	df      map[string]int64
}

// ftsTokenize is the tokenizer chunks_fts was created with (schemaV1, schemaV6); the search's
// word lookups must split and stem words exactly as the index did.
const ftsTokenize = `porter unicode61 remove_diacritics 2`

// tokenizer turns query words into the terms the FTS index holds for them, by asking
// SQLite: a private in-memory database has a contentless FTS5 table with the same
// tokenizer, and an fts5vocab "instance" table over it lists each row's tokens. Words
// map to the same terms forever, so results are cached.
type tokenizer struct {
	mu    sync.Mutex
	db    *sql.DB
	conn  *sql.Conn
	cache map[string][]string
}

// tokens returns each word's index terms, in order: usually one, none for a word the
// tokenizer drops, several for one it splits.
func (t *tokenizer) close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var err error
	if t.conn != nil {
		err = errors.Join(t.conn.Close(), t.db.Close())
	}
	t.db, t.conn = nil, nil
	return err
}

func (t *tokenizer) tokens(ctx context.Context, words []string) ([][]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([][]string, len(words))
	var miss []int
	for i, w := range words {
		if toks, ok := t.cache[w]; ok {
			out[i] = toks
		} else {
			miss = append(miss, i)
		}
	}
	if len(miss) == 0 {
		return out, nil
	}
	if err := t.tokenize(ctx, words, miss, out); err != nil {
		// Start afresh next time rather than trust a connection in an unknown state.
		if t.conn != nil {
			t.conn.Close()
		}
		if t.db != nil {
			t.db.Close()
		}
		t.db, t.conn = nil, nil
		return nil, fmt.Errorf("store: tokenize: %w", err)
	}
	if t.cache == nil || len(t.cache)+len(miss) > maxCachedTerms {
		t.cache = map[string][]string{}
	}
	for _, i := range miss {
		t.cache[words[i]] = out[i]
	}
	return out, nil
}

func (t *tokenizer) tokenize(ctx context.Context, words []string, miss []int, out [][]string) error {
	if err := t.open(ctx); err != nil {
		return err
	}
	if _, err := t.conn.ExecContext(ctx, `INSERT INTO tok(tok) VALUES ('delete-all')`); err != nil {
		return err
	}
	args := make([]any, 0, 2*len(miss))
	for j, i := range miss {
		args = append(args, j+1, words[i])
	}
	if _, err := t.conn.ExecContext(ctx, `INSERT INTO tok(rowid, w) VALUES (?, ?)`+
		strings.Repeat(", (?, ?)", len(miss)-1), args...); err != nil {
		return err
	}
	rows, err := t.conn.QueryContext(ctx, `SELECT doc, offset, term FROM tok_instance ORDER BY doc, offset`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for _, i := range miss {
		out[i] = []string{}
	}
	for rows.Next() {
		var doc, offset int
		var term string
		if err := rows.Scan(&doc, &offset, &term); err != nil {
			return err
		}
		if doc < 1 || doc > len(miss) {
			return fmt.Errorf("unexpected row %d", doc)
		}
		out[miss[doc-1]] = append(out[miss[doc-1]], term)
	}
	return rows.Err()
}

// ChunkTexts fetches chunks by id, in the order asked; ids that no longer exist are left out.
func (db *DB) ChunkTexts(ctx context.Context, ids []int64) ([]Hit, error) {
	byID := make(map[int64]Hit, len(ids))
	const batch = 500 // stay well under SQLite's variable limit
	for start := 0; start < len(ids); start += batch {
		part := ids[start:min(start+batch, len(ids))]
		args := make([]any, len(part))
		for i, id := range part {
			args[i] = id
		}
		rows, err := db.r.QueryContext(ctx, `SELECT c.id, d.id, d.path, d.rel, d.title, c.ordinal, c.text, c.heading,
				c.page, c.line_start, c.line_end
			FROM chunks c JOIN documents d ON d.id = c.document_id
			WHERE c.id IN (?`+strings.Repeat(",?", len(part)-1)+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("store: chunk texts: %w", err)
		}
		for rows.Next() {
			var h Hit
			if err := rows.Scan(&h.ChunkID, &h.DocumentID, &h.Path, &h.Rel, &h.Title, &h.Ordinal, &h.Text, &h.Heading,
				&h.Page, &h.LineStart, &h.LineEnd); err != nil {
				rows.Close()
				return nil, fmt.Errorf("store: chunk texts: %w", err)
			}
			byID[h.ChunkID] = h
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("store: chunk texts: %w", err)
		}
	}
	out := make([]Hit, 0, len(byID))
	for _, id := range ids {
		if h, ok := byID[id]; ok {
			out = append(out, h)
			delete(byID, id) // a repeated id is returned once
		}
	}
	return out, nil
}

// stopwords are common English words (plus question words) that add cost but little
// ranking signal to an OR query.
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are as at be
		because been before being below between both but by can could did do does doing down during each
		few for from further had has have having he her here hers herself him himself his how i if in into
		is it its itself just me more most my myself no nor not now of off on once only or other our ours
		ourselves out over own same she should so some such than that the their theirs them themselves then
		there these they this those through to too under until up very was we were what when where which
		while who whom why will with would you your yours yourself yourselves tell show give find explain
		describe please s t don doesn isn aren wasn weren won`) {
		m[w] = true
	}
	return m
}()

// open starts the tokenizer's private database once. t.mu must be held.
func (t *tokenizer) open(ctx context.Context) error {
	if t.conn == nil {
		db, err := sql.Open("sqlite3", ":memory:")
		if err != nil {
			return err
		}
		db.SetMaxOpenConns(1)
		conn, err := db.Conn(ctx)
		if err != nil {
			db.Close()
			return err
		}
		t.db, t.conn = db, conn
		for _, s := range []string{
			`CREATE VIRTUAL TABLE tok USING fts5(w, content = '', tokenize = '` + ftsTokenize + `')`,
			`CREATE VIRTUAL TABLE tok_instance USING fts5vocab(tok, instance)`,
		} {
			if _, err := conn.ExecContext(ctx, s); err != nil {
				return err
			}
		}
	}
	return nil
}
