// Package retrieve finds the passages that answer a question: BM25 over the
// store's FTS5 index and nearest neighbours over the chunk embeddings, run
// side by side and fused by reciprocal rank. It keeps the vector index of
// each workspace in step with the store (persisting it beside the database),
// and caches query embeddings and whole results.
package retrieve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"lore/index/vector"
	"lore/store"
)

// Embedder turns texts into vectors. ID names the model: vectors from
// different models never meet.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	ID() string
}

// Reranker scores each of docs against query (a cross-encoder); higher is better.
type Reranker interface {
	Rerank(ctx context.Context, query string, docs []string) ([]float32, error)
	ID() string
}

// Options tunes one search. The zero value means the defaults.
type Options struct {
	TopK       int  // passages returned after fusion (default 8)
	Candidates int  // per retriever before fusion (default 50)
	EfSearch   int  // HNSW beam at query time (0 = index default; only values above it take effect)
	NoCache    bool // neither read nor fill the result cache (benchmarks)
}

const (
	defaultTopK       = 8
	defaultCandidates = 50
	rrfK              = 60 // reciprocal rank fusion constant, as in Cormack et al.
)

func (o Options) withDefaults() Options {
	if o.TopK <= 0 {
		o.TopK = defaultTopK
	}
	if o.Candidates <= 0 {
		o.Candidates = defaultCandidates
	}
	o.EfSearch = max(o.EfSearch, 0)
	return o
}

// Scores says how each retriever saw a passage. A rank of 0 means that
// retriever did not return it (its score is then 0 too).
type Scores struct {
	BM25       float64 `json:"bm25"`
	Vector     float64 `json:"vector"`
	Fused      float64 `json:"fused"`
	Rerank     float64 `json:"rerank"`
	BM25Rank   int     `json:"bm25_rank,omitempty"`
	VectorRank int     `json:"vector_rank,omitempty"`
}

// Passage is a retrieved chunk with its location.
type Passage struct {
	ChunkID, DocID int64
	Path, Rel      string
	Title          string
	Heading        string
	Text           string
	Ordinal        int
	Page           int
	LineStart      int
	LineEnd        int
	Tokens         int // estimated (see estimateTokens)
	Scores         Scores
}

// Step is one stage's start (ms since Search was called) and duration (ms).
type Step struct{ Start, Ms float64 }

// Timing holds each stage of a search. Embed and Vector run alongside BM25;
// Fetch loads the texts of the passages kept.
type Timing struct{ Embed, Vector, BM25, Fuse, Fetch, Total Step }

// Modes of a Result.
const (
	ModeHybrid = "hybrid"
	ModeBM25   = "bm25"
	ModeVector = "vector"
)

// Result is what Search found.
type Result struct {
	Passages      []Passage
	Timing        Timing
	Mode          string // ModeHybrid, ModeBM25 (no embedding model, or the vector step failed) or ModeVector (BM25 failed)
	Degraded      string // why not hybrid; "" when hybrid
	EmbedCacheHit bool
	EmbedLookup   bool  // the query embedding was looked up (EmbedCacheHit says where it came from)
	CacheHit      bool  // the whole result came from the retrieval cache
	Generation    int64 // the workspace's index generation the result reflects
	// VectorStale reports that the vector index lagged behind Generation (a
	// refresh was started); such results are not cached.
	VectorStale bool
}

func (r Result) clone() Result {
	r.Passages = slices.Clone(r.Passages)
	return r
}

// Config tunes a Retriever. The zero value means the defaults.
type Config struct {
	Vector          vector.Options // graph parameters and the exact→HNSW crossover
	EmbedCacheSize  int            // query embeddings kept (default 1024)
	ResultCacheSize int            // results kept (default 256)
	// IndexWait bounds how long Search waits for a workspace's vector index
	// to load or build before answering from BM25 alone (default 1s;
	// negative: do not wait). The load or build carries on regardless.
	IndexWait time.Duration
}

// Retriever searches the store. It is safe for concurrent use.
type Retriever struct {
	db  *store.DB
	dir string
	emb Embedder
	cfg Config

	embeds  *lru[string, []float32]
	results *lru[resultKey, cachedResult]

	mu      sync.Mutex
	indexes map[indexKey]*vecState
	closed  bool

	bg     context.Context // background refreshes; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	loads, builds, updates, compactions, failures atomic.Uint64
	lastRebuild                                   atomic.Pointer[string]
}

type resultKey struct {
	ws                         int64
	model, query               string
	topK, candidates, efSearch int
}

type cachedResult struct {
	gen int64
	res Result
}

// New returns a Retriever over db. dir is the folder for persisted vector
// graphs (one file per workspace and embedding model; created when needed;
// "" keeps them in memory only). emb may be nil: BM25 only.
func New(db *store.DB, dir string, emb Embedder) *Retriever {
	return NewWithConfig(db, dir, emb, Config{})
}

// NewWithConfig is New with tuning.
func NewWithConfig(db *store.DB, dir string, emb Embedder, cfg Config) *Retriever {
	if cfg.EmbedCacheSize <= 0 {
		cfg.EmbedCacheSize = 1024
	}
	if cfg.ResultCacheSize <= 0 {
		cfg.ResultCacheSize = 256
	}
	if cfg.IndexWait == 0 {
		cfg.IndexWait = time.Second
	}
	bg, cancel := context.WithCancel(context.Background())
	return &Retriever{
		db: db, dir: dir, emb: emb, cfg: cfg,
		embeds:  newLRU[string, []float32](cfg.EmbedCacheSize),
		results: newLRU[resultKey, cachedResult](cfg.ResultCacheSize),
		indexes: make(map[indexKey]*vecState),
		bg:      bg, cancel: cancel,
	}
}

// Close stops background index refreshes and waits for them. Searches after
// Close answer from BM25 and indexes already in memory.
func (r *Retriever) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	return nil
}

// CacheStats counts cache use and vector index maintenance.
type CacheStats struct {
	EmbedHits, EmbedMisses   uint64
	ResultHits, ResultMisses uint64
	EmbedEntries             int
	ResultEntries            int
	IndexLoads               uint64 // persisted graphs verified and loaded
	IndexBuilds              uint64 // full builds from the store
	IndexUpdates             uint64 // incremental refreshes that changed the index
	IndexCompactions         uint64 // HNSW rebuilds to drop tombstones
	IndexFailures            uint64 // refreshes that ended in an error
	LastRebuildReason        string // why the last full build happened
}

// Stats reports cache hits and misses and index maintenance counts.
func (r *Retriever) Stats() CacheStats {
	s := CacheStats{
		EmbedHits: r.embeds.hits.Load(), EmbedMisses: r.embeds.misses.Load(),
		ResultHits: r.results.hits.Load(), ResultMisses: r.results.misses.Load(),
		EmbedEntries: r.embeds.len(), ResultEntries: r.results.len(),
		IndexLoads: r.loads.Load(), IndexBuilds: r.builds.Load(),
		IndexUpdates: r.updates.Load(), IndexCompactions: r.compactions.Load(), IndexFailures: r.failures.Load(),
	}
	if p := r.lastRebuild.Load(); p != nil {
		s.LastRebuildReason = *p
	}
	return s
}

// normalize is the cache key form of a query: lower case, single spaces.
func normalize(q string) string {
	return strings.Join(strings.Fields(strings.ToLower(q)), " ")
}

func (r *Retriever) model() string {
	if r.emb == nil {
		return ""
	}
	return r.emb.ID()
}

// Reasons to answer from BM25 alone. errNoEmbedder and errNoVectors last as
// long as the generation does, so results degraded by them may be cached;
// errBuilding passes within seconds.
var (
	errNoEmbedder = errors.New("no embedding model")
	errNoVectors  = errors.New("no passages embedded with this model yet")
	errBuilding   = errors.New("vector index is still loading")
)

// Search finds the passages of workspace ws that best answer query. The
// query embedding and vector search run alongside BM25; if the vector side
// is unavailable or fails, the result comes from BM25 alone (Mode "bm25",
// Degraded saying why) rather than an error, and the other way round.
func (r *Retriever) Search(ctx context.Context, ws int64, query string, opt Options) (Result, error) {
	t0 := time.Now()
	opt = opt.withDefaults()
	norm := normalize(query)
	gen, err := r.db.Generation(ctx, ws)
	if err != nil {
		return Result{}, fmt.Errorf("retrieve: %w", err)
	}
	model := r.model()
	key := resultKey{ws, model, norm, opt.TopK, opt.Candidates, opt.EfSearch}
	if !opt.NoCache {
		if c, ok := r.results.get(key, func(c cachedResult) bool { return c.gen == gen }); ok {
			res := c.res.clone()
			res.CacheHit, res.EmbedCacheHit, res.EmbedLookup, res.VectorStale = true, false, false, false
			res.Timing = Timing{Total: span(t0, t0, time.Now())}
			return res, nil
		}
	}

	var (
		wg     sync.WaitGroup
		hits   []store.Ranked
		bmErr  error
		bmStep Step
		vo     vecOutcome
	)
	if norm != "" {
		wg.Go(func() {
			s := time.Now()
			hits, bmErr = r.db.RankBM25(ctx, ws, query, opt.Candidates)
			hits = byDocument(hits)
			bmStep = span(t0, s, time.Now())
		})
	}
	if r.emb == nil {
		vo.err = errNoEmbedder
	} else if norm != "" {
		wg.Go(func() { vo = r.vectorSearch(ctx, t0, ws, norm, gen, opt) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("retrieve: %w", err)
	}

	res := Result{Generation: gen, EmbedCacheHit: vo.cacheHit, EmbedLookup: vo.looked, VectorStale: vo.stale}
	res.Timing.Embed, res.Timing.Vector, res.Timing.BM25 = vo.embed, vo.search, bmStep
	if res.Mode, res.Degraded, err = decideMode(bmErr, vo.err); err != nil {
		return Result{}, fmt.Errorf("retrieve: %w", err)
	}

	if bmErr != nil {
		hits = nil
	}
	s := time.Now()
	cands := fuse(hits, vo.hits)
	res.Timing.Fuse = span(t0, s, time.Now())
	s = time.Now()
	res.Passages, err = r.passages(ctx, cands, opt.TopK)
	res.Timing.Fetch = span(t0, s, time.Now())
	if err != nil {
		return Result{}, fmt.Errorf("retrieve: %w", err)
	}
	res.Timing.Total = span(t0, t0, time.Now())

	// A result is cached only when a repeat could not do better before the
	// generation moves: not after a failure, nor from a lagging index.
	lasting := vo.err == nil || errors.Is(vo.err, errNoEmbedder) || errors.Is(vo.err, errNoVectors)
	if !opt.NoCache && bmErr == nil && lasting && !vo.stale {
		r.results.put(key, cachedResult{gen: gen, res: res.clone()})
	}
	return res, nil
}

// decideMode names the result's mode from what each retriever reported: one
// side failing degrades the result, both failing fails the search.
func decideMode(bmErr, vecErr error) (mode, degraded string, err error) {
	switch {
	case bmErr != nil && vecErr != nil:
		return "", "", fmt.Errorf("bm25: %w; vector: %v", bmErr, vecErr)
	case vecErr != nil:
		return ModeBM25, vecErr.Error(), nil
	case bmErr != nil:
		return ModeVector, "bm25 failed: " + bmErr.Error(), nil
	}
	return ModeHybrid, "", nil
}

func span(t0, start, end time.Time) Step {
	return Step{Start: ms(start.Sub(t0)), Ms: ms(end.Sub(start))}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

type vecOutcome struct {
	hits          []vector.Result
	embed, search Step
	cacheHit      bool
	looked        bool // the query embedding was looked up
	stale         bool
	err           error // why the vector side gave nothing
}

func (r *Retriever) vectorSearch(ctx context.Context, t0 time.Time, ws int64, norm string, gen int64, opt Options) (out vecOutcome) {
	st := r.state(ws, r.emb.ID())
	switch v := st.view(); {
	case v.ready && v.gen >= gen && v.idx == nil:
		out.err = errNoVectors // known empty: skip the embedding
		return out
	case !v.ready:
		r.kick(st) // load (or build) while the query is embedded
	}
	s := time.Now()
	q, hit, err := r.embedQuery(ctx, norm)
	out.embed, out.cacheHit, out.looked = span(t0, s, time.Now()), hit, true
	if err != nil {
		out.err = fmt.Errorf("query embedding failed: %w", err)
		return out
	}
	s = time.Now()
	defer func() { out.search = span(t0, s, time.Now()) }()
	v, stale, err := r.current(ctx, st, gen)
	if err != nil {
		out.err = err
		return out
	}
	if v.idx == nil {
		out.err = errNoVectors
		return out
	}
	if len(q) != v.dim {
		out.err = fmt.Errorf("query embedding has %d dimensions, the index %d", len(q), v.dim)
		return out
	}
	// The index takes no per-query beam, but HNSW widens its beam to k, so
	// asking for EfSearch results and keeping Candidates gives that beam.
	hits := v.idx.Search(q, max(opt.Candidates, opt.EfSearch))
	out.hits = hits[:min(len(hits), opt.Candidates)]
	out.stale = stale
	return out
}

// embedQuery returns the unit-length embedding of a normalised query (the
// model sees that lower-cased form, so a cached vector is exactly what it
// would return), through the cache. Cached vectors are shared and must not
// be modified.
func (r *Retriever) embedQuery(ctx context.Context, norm string) ([]float32, bool, error) {
	key := r.emb.ID() + "\x00" + norm
	if v, ok := r.embeds.get(key, nil); ok {
		return v, true, nil
	}
	vs, err := r.emb.Embed(ctx, []string{norm})
	if err != nil {
		return nil, false, err
	}
	if len(vs) != 1 || len(vs[0]) == 0 {
		return nil, false, fmt.Errorf("%s returned %d vectors for one text", r.emb.ID(), len(vs))
	}
	v := slices.Clone(vs[0])
	if err := finite(v); err != nil {
		return nil, false, err
	}
	vector.Normalize(v)
	r.embeds.put(key, v)
	return v, false, nil
}

// candidate is a chunk found by either retriever, before its text is known.
type candidate struct {
	id     int64
	scores Scores
}

// fuse merges both ranked lists by reciprocal rank fusion: each list adds
// 1/(rrfK+rank). Ties go to the better single rank, then the lower id, so
// equal inputs give equal output.
func fuse(bm []store.Ranked, vec []vector.Result) []candidate {
	byID := make(map[int64]int, len(bm)+len(vec))
	out := make([]candidate, 0, len(bm)+len(vec))
	at := func(id int64) *candidate {
		if i, ok := byID[id]; ok {
			return &out[i]
		}
		byID[id] = len(out)
		out = append(out, candidate{id: id})
		return &out[len(out)-1]
	}
	for i := range bm {
		c := at(bm[i].ChunkID)
		if c.scores.BM25Rank != 0 {
			continue // a repeated id keeps its best rank
		}
		c.scores.BM25, c.scores.BM25Rank = bm[i].Score, i+1
		c.scores.Fused += 1 / float64(rrfK+i+1)
	}
	for i, h := range vec {
		c := at(h.ID)
		if c.scores.VectorRank != 0 {
			continue
		}
		c.scores.Vector, c.scores.VectorRank = float64(h.Score), i+1
		c.scores.Fused += 1 / float64(rrfK+i+1)
	}
	slices.SortFunc(out, func(a, b candidate) int {
		if a.scores.Fused != b.scores.Fused {
			if a.scores.Fused > b.scores.Fused {
				return -1
			}
			return 1
		}
		if ra, rb := bestRank(a.scores), bestRank(b.scores); ra != rb {
			return ra - rb
		}
		return cmpInt64(a.id, b.id)
	})
	return out
}

func bestRank(s Scores) int {
	switch {
	case s.BM25Rank == 0:
		return s.VectorRank
	case s.VectorRank == 0:
		return s.BM25Rank
	}
	return min(s.BM25Rank, s.VectorRank)
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// passages turns the best candidates into passages, their texts fetched in
// one store call. An id the store no longer has (the vector index lags a
// deletion) is skipped, and the window looks at twice topK candidates so that
// skips rarely shorten the answer.
func (r *Retriever) passages(ctx context.Context, cands []candidate, topK int) ([]Passage, error) {
	window := cands[:min(len(cands), 2*topK)]
	if len(window) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(window))
	for i, c := range window {
		ids[i] = c.id
	}
	hits, err := r.db.ChunkTexts(ctx, ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[int64]*store.Hit, len(hits))
	for i := range hits {
		byID[hits[i].ChunkID] = &hits[i]
	}
	out := make([]Passage, 0, min(topK, len(window)))
	for _, c := range window {
		if len(out) == topK {
			break
		}
		h := byID[c.id]
		if h == nil {
			continue
		}
		out = append(out, Passage{
			ChunkID: h.ChunkID, DocID: h.DocumentID, Path: h.Path, Rel: h.Rel, Title: h.Title,
			Heading: h.Heading, Text: h.Text, Ordinal: h.Ordinal, Page: h.Page,
			LineStart: h.LineStart, LineEnd: h.LineEnd, Tokens: estimateTokens(h.Text),
			Scores: c.scores,
		})
	}
	return out, nil
}

// estimateTokens guesses a passage's token count: the store keeps one per
// chunk but its search results do not carry it. About four bytes a token
// holds for English with common tokenizers; the app recounts with the
// model's own tokenizer when it has one.
func estimateTokens(text string) int {
	return (len(text) + 3) / 4
}

// byDocument adds to each document's best chunk the score of its second
// best among the ranked, and orders them again. A chunk's bm25 favours a
// short chunk that holds a word once (a four-line section titled with it)
// over a document that is about the question throughout; a document's two
// best chunks together measure that. Measured with lore eval retrieval
// (eval/, README): MRR +0.03 to +0.09 on the sample library and the two
// tuning sets, -0.005 on the held-out man pages; summing three or five
// chunks, or weighting chunks by length, did worse.
func byDocument(rs []store.Ranked) []store.Ranked {
	best := map[int64]int{} // document → index of its best chunk
	for i, r := range rs {
		if j, ok := best[r.Document]; !ok {
			best[r.Document] = i
		} else if j >= 0 {
			rs[j].Score += r.Score // rs is ordered: r is the document's second
			best[r.Document] = -1
		}
	}
	slices.SortStableFunc(rs, func(a, b store.Ranked) int { return cmp.Compare(b.Score, a.Score) })
	return rs
}
