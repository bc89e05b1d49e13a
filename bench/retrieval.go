package bench

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"lore/index/retrieve"
	"lore/index/vector"
	"lore/store"
)

// HashEmbedder is a deterministic stand-in for an embedding model: a bag of
// words, each word hashed to a signed bucket, normalised. Texts sharing
// words are similar, nothing more. It serves benchmarks and demos that have
// no model file.
type HashEmbedder struct {
	Dim int // default 384
}

// ID names the embedder by its dimension.
func (h HashEmbedder) ID() string { return fmt.Sprintf("hash-bow-%d", h.dim()) }

func (h HashEmbedder) dim() int {
	if h.Dim <= 0 {
		return 384
	}
	return h.Dim
}

// Embed returns one unit vector per text (a zero vector for a text without words).
func (h HashEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if i%64 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		v := make([]float32, h.dim())
		for _, w := range words(t) {
			f := fnv.New64a()
			f.Write([]byte(w))
			x := f.Sum64()
			sign := float32(1)
			if x>>63 == 1 {
				sign = -1
			}
			v[x%uint64(len(v))] += sign
		}
		vector.Normalize(v)
		out[i] = v
	}
	return out, nil
}

func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// CorpusConfig describes a synthetic corpus for benchmarks.
type CorpusConfig struct {
	Workspace    string            // default "bench"
	Chunks       int               // total chunks (default 10,000)
	ChunksPerDoc int               // default 10
	Words        int               // words per chunk (default 180, about 1,200 characters)
	Seed         uint64            // same seed, same corpus
	Embedder     retrieve.Embedder // nil: no vectors
	// Progress, when set, is told how many chunks are stored, then embedded.
	Progress func(phase string, done, total int)
}

// Word frequencies follow Zipf's law over a synthetic vocabulary, with
// English stopwords mixed in, so that the most common content words match a
// large share of chunks, as in real text (the case that makes FTS5 OR
// queries slow).
const (
	vocabSize = 30000
	zipfS     = 1.1
)

var syllables = [16]string{"ka", "lo", "mi", "ne", "ru", "ta", "si", "po", "fe", "gu", "da", "ve", "to", "li", "ma", "ze"}

// vocab returns the i-th synthetic word; distinct i give distinct words.
func vocab(i int) string {
	var b strings.Builder
	for n := i + 16; n > 0; n /= 16 {
		b.WriteString(syllables[n%16])
	}
	return b.String()
}

var fillers = strings.Fields("the of and to in is that for it with as on be by this are or from at which an")

func chunkText(r *rand.Rand, z *rand.Zipf, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		if r.IntN(10) < 4 {
			b.WriteString(fillers[r.IntN(len(fillers))])
		} else {
			b.WriteString(vocab(int(z.Uint64())))
		}
		if r.IntN(15) == 0 {
			b.WriteByte('.')
		}
	}
	return b.String()
}

// Corpus fills a workspace of db with a synthetic corpus (documents of
// a few chunks, embedded with cfg.Embedder when set) and returns its id.
// Running it again with the same config replaces the same documents.
func Corpus(ctx context.Context, db *store.DB, cfg CorpusConfig) (int64, error) {
	if cfg.Workspace == "" {
		cfg.Workspace = "bench"
	}
	if cfg.Chunks <= 0 {
		cfg.Chunks = 10000
	}
	if cfg.ChunksPerDoc <= 0 {
		cfg.ChunksPerDoc = 10
	}
	if cfg.Words <= 0 {
		cfg.Words = 180
	}
	progress := cfg.Progress
	if progress == nil {
		progress = func(string, int, int) {}
	}
	ws, err := db.EnsureWorkspace(ctx, cfg.Workspace)
	if err != nil {
		return 0, fmt.Errorf("bench corpus: %w", err)
	}
	root, err := filepath.Abs(string(os.PathSeparator) + "lore-bench-corpus")
	if err != nil {
		return 0, fmt.Errorf("bench corpus: %w", err)
	}
	folder, err := db.AddFolder(ctx, ws.ID, root)
	if err != nil {
		return 0, fmt.Errorf("bench corpus: %w", err)
	}
	r := rand.New(rand.NewPCG(cfg.Seed, 0x10e))
	z := rand.NewZipf(r, zipfS, 1, vocabSize-1)
	for d, stored := 0, 0; stored < cfg.Chunks; d++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		n := min(cfg.ChunksPerDoc, cfg.Chunks-stored)
		chunks := make([]store.Chunk, n)
		for i := range chunks {
			chunks[i] = store.Chunk{Ordinal: i, Text: chunkText(r, z, cfg.Words), Tokens: cfg.Words * 13 / 10,
				Heading: fmt.Sprintf("Section %d", i+1), LineStart: 1 + i*20, LineEnd: 20 + i*20}
		}
		rel := fmt.Sprintf("doc%06d.md", d)
		doc := store.Document{WorkspaceID: ws.ID, FolderID: folder.ID, Path: filepath.Join(root, rel), Rel: rel,
			Size: int64(n * cfg.Words * 7), ModTime: time.Unix(1700000000, 0), Hash: fmt.Sprintf("%x-%d", cfg.Seed, d),
			Parser: "text", Title: rel}
		if err := db.ReplaceDocument(ctx, doc, chunks); err != nil {
			return 0, fmt.Errorf("bench corpus: %w", err)
		}
		stored += n
		if d%100 == 0 || stored == cfg.Chunks {
			progress("store", stored, cfg.Chunks)
		}
	}
	if cfg.Embedder == nil {
		return ws.ID, nil
	}
	model := cfg.Embedder.ID()
	var after int64
	done := 0
	for {
		batch, err := db.ChunksMissingEmbedding(ctx, ws.ID, model, after, 512)
		if err != nil {
			return 0, fmt.Errorf("bench corpus: %w", err)
		}
		if len(batch) == 0 {
			return ws.ID, nil
		}
		texts := make([]string, len(batch))
		for i, c := range batch {
			texts[i] = c.Text
		}
		vecs, err := cfg.Embedder.Embed(ctx, texts)
		if err != nil {
			return 0, fmt.Errorf("bench corpus: embed: %w", err)
		}
		if len(vecs) != len(batch) {
			return 0, fmt.Errorf("bench corpus: embed: %d vectors for %d texts", len(vecs), len(batch))
		}
		embs := make([]store.Embedding, len(batch))
		for i, c := range batch {
			embs[i] = store.Embedding{ChunkID: c.ID, Vec: vecs[i], Text: c.Text}
		}
		if err := db.PutEmbeddings(ctx, model, embs); err != nil {
			return 0, fmt.Errorf("bench corpus: %w", err)
		}
		after = batch[len(batch)-1].ID
		done += len(batch)
		progress("embed", done, cfg.Chunks)
	}
}

// Queries returns n questions over the BenchCorpus vocabulary, shaped
// like natural ones: question words and stopwords, one common content word
// (in a large share of chunks), one of middling frequency and one rare.
func Queries(n int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 0x9e))
	shapes := []string{"how does the %s affect %s in %s?", "what is the %s of %s and %s",
		"why would %s use %s with %s", "where is %s %s %s described"}
	out := make([]string, n)
	for i := range out {
		common, mid, rare := vocab(r.IntN(20)), vocab(20+r.IntN(1000)), vocab(1020+r.IntN(vocabSize-1020))
		out[i] = fmt.Sprintf(shapes[r.IntN(len(shapes))], common, mid, rare)
	}
	return out
}

// RetrievalReport holds what Bench measured. Hybrid is the whole search minus
// the query embedding (which is cached after a warm-up pass anyway).
type RetrievalReport struct {
	Queries int
	Vectors int           // vectors in the index (0: BM25 only)
	Refresh time.Duration // bringing the vector index up to date first (load or build)
	BM25    Latency
	Vector  Latency
	Fetch   Latency
	Hybrid  Latency
	Modes   map[string]int
}

func (b RetrievalReport) String() string {
	return fmt.Sprintf("queries=%d vectors=%d refresh=%s modes=%v\n  bm25    %s\n  vector  %s\n  fetch   %s\n  hybrid  %s (excluding the query embedding)",
		b.Queries, b.Vectors, b.Refresh.Round(time.Millisecond), b.Modes, b.BM25, b.Vector, b.Fetch, b.Hybrid)
}

// Retrieval runs each query once to warm caches (query embeddings, SQLite
// pages), then again measuring, one at a time, with the result cache off.
func Retrieval(ctx context.Context, r *retrieve.Retriever, ws int64, queries []string, opt retrieve.Options) (RetrievalReport, error) {
	if len(queries) == 0 {
		return RetrievalReport{}, errors.New("retrieve: bench: no queries")
	}
	rep := RetrievalReport{Queries: len(queries), Modes: map[string]int{}}
	start := time.Now()
	if err := r.Refresh(ctx, ws); err != nil {
		return rep, err
	}
	rep.Refresh = time.Since(start)
	rep.Vectors = r.Vectors(ws)
	opt.NoCache = true
	for _, q := range queries {
		if _, err := r.Search(ctx, ws, q, opt); err != nil {
			return rep, err
		}
	}
	var bm, vec, fetch, hyb []time.Duration
	for _, q := range queries {
		res, err := r.Search(ctx, ws, q, opt)
		if err != nil {
			return rep, err
		}
		rep.Modes[res.Mode]++
		t := res.Timing
		bm = append(bm, msDur(t.BM25.Ms))
		vec = append(vec, msDur(t.Vector.Ms))
		fetch = append(fetch, msDur(t.Fetch.Ms))
		hyb = append(hyb, msDur(t.Total.Ms-t.Embed.Ms))
	}
	rep.BM25, rep.Vector, rep.Fetch, rep.Hybrid = summarise(bm), summarise(vec), summarise(fetch), summarise(hyb)
	return rep, nil
}

func msDur(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
