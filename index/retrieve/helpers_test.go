package retrieve

import (
	"context"
	"errors"
	"hash/fnv"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"lore/index/vector"
	"lore/store"
)

// conceptEmbedder is a deterministic embedder for tests: words map to
// concepts through a small synonym table (so it finds passages that share
// no word with the query, as a real model would), concepts hash into 64
// signed buckets, and the result is normalised. Words it does not know are
// their own concept.
type conceptEmbedder struct {
	model string
	fail  error // returned by every Embed when set
	calls atomic.Int64
}

var synonyms = map[string]string{
	"car": "car", "cars": "car", "automobile": "car", "vehicle": "car", "vehicles": "car",
	"repair": "repair", "maintenance": "repair", "service": "repair", "servicing": "repair", "fix": "repair",
}

var testStopwords = map[string]bool{"the": true, "and": true, "at": true, "a": true, "of": true, "to": true, "in": true}

func (e *conceptEmbedder) ID() string {
	if e.model == "" {
		return "concept-64"
	}
	return e.model
}

func (e *conceptEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.calls.Add(1)
	if e.fail != nil {
		return nil, e.fail
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, 64)
		for _, w := range words(t) {
			if testStopwords[w] {
				continue
			}
			if c, ok := synonyms[w]; ok {
				w = c
			}
			h := fnv.New64a()
			h.Write([]byte(w))
			x := h.Sum64()
			sign := float32(1)
			if x>>63 == 1 {
				sign = -1
			}
			v[x%64] += sign
		}
		vector.Normalize(v)
		out[i] = v
	}
	return out, nil
}

// fixture is a workspace in a real SQLite store.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	db     *store.DB
	ws     int64
	folder int64
	dir    string // vector graph folder
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	tmp := t.TempDir()
	db, err := store.Open(ctx, filepath.Join(tmp, "lore.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ws, err := db.EnsureWorkspace(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(tmp, "docs")
	f, err := db.AddFolder(ctx, ws.ID, root)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: ctx, db: db, ws: ws.ID, folder: f.ID, dir: filepath.Join(tmp, "vectors")}
}

// put stores (or replaces) document rel with one chunk per text.
func (f *fixture) put(rel string, texts ...string) int64 {
	f.t.Helper()
	chunks := make([]store.Chunk, len(texts))
	for i, s := range texts {
		chunks[i] = store.Chunk{Ordinal: i, Text: s, Tokens: len(strings.Fields(s)), LineStart: 1 + 10*i, LineEnd: 9 + 10*i,
			Heading: "H" + rel}
	}
	path := filepath.Join("/docs", rel)
	d := store.Document{WorkspaceID: f.ws, FolderID: f.folder, Path: path, Rel: rel, Size: 1, ModTime: time.Unix(1, 0),
		Hash: strings.Join(texts, "|"), Parser: "text", Title: rel}
	if err := f.db.ReplaceDocument(f.ctx, d, chunks); err != nil {
		f.t.Fatal(err)
	}
	doc, err := f.db.DocumentByPath(f.ctx, f.ws, path)
	if err != nil {
		f.t.Fatal(err)
	}
	return doc.ID
}

func (f *fixture) chunkIDs(doc int64) []int64 {
	f.t.Helper()
	cs, err := f.db.Chunks(f.ctx, doc)
	if err != nil {
		f.t.Fatal(err)
	}
	var ids []int64
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	return ids
}

// embed stores vectors from emb for every chunk that lacks one.
func (f *fixture) embed(emb Embedder) {
	f.t.Helper()
	var after int64
	for {
		batch, err := f.db.ChunksMissingEmbedding(f.ctx, f.ws, emb.ID(), after, 100)
		if err != nil {
			f.t.Fatal(err)
		}
		if len(batch) == 0 {
			return
		}
		texts := make([]string, len(batch))
		for i, c := range batch {
			texts[i] = c.Text
		}
		vecs, err := emb.Embed(f.ctx, texts)
		if err != nil {
			f.t.Fatal(err)
		}
		embs := make([]store.Embedding, len(batch))
		for i, c := range batch {
			embs[i] = store.Embedding{ChunkID: c.ID, Vec: vecs[i]}
		}
		if err := f.db.PutEmbeddings(f.ctx, emb.ID(), embs); err != nil {
			f.t.Fatal(err)
		}
		after = batch[len(batch)-1].ID
	}
}

// retriever returns a Retriever closed at the end of the test. It waits
// long for a first index so that a loaded test machine gives the same answers.
func (f *fixture) retriever(emb Embedder, cfg Config) *Retriever {
	if cfg.IndexWait == 0 {
		cfg.IndexWait = time.Minute
	}
	r := NewWithConfig(f.db, f.dir, emb, cfg)
	f.t.Cleanup(func() { r.Close() })
	return r
}

// seedCars stores the corpus of the hybrid test: garage.md shares no word
// with the query "automobile maintenance qz7731" but its concepts; ledger.md
// shares only the rare code, among many other words.
func (f *fixture) seedCars() {
	f.put("garage.md", "Car repair: service the vehicle engine and brakes regularly.")
	f.put("ledger.md", "Ledger entry qz7731: pallets, forklifts, invoices, receipts, shipping, crates, warehouse, inventory, customs, freight, barcode, dock.")
	f.put("museum.md", "The automobile museum shows vintage cars.")
	f.put("bike.md", "Bicycle repair and maintenance at home.")
	f.put("fleet.md", "Fleet vehicles need servicing.")
	f.put("bread.md", "Bread baking needs flour, water, salt and yeast.")
	f.put("stars.md", "Telescopes reveal distant galaxies and nebulae.")
	f.put("garden.md", "Tomatoes grow best with sunlight, compost and regular watering.")
}

func passageByRel(res Result, rel string) (Passage, bool) {
	for _, p := range res.Passages {
		if p.Rel == rel {
			return p, true
		}
	}
	return Passage{}, false
}

func rels(res Result) []string {
	var out []string
	for _, p := range res.Passages {
		out = append(out, p.Rel)
	}
	return out
}

var errEmbedDown = errors.New("embedding model crashed")

func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}
