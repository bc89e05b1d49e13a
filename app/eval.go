package app

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"lore/index/retrieve"
	"lore/store"
)

// EvalQuery is one labelled question: the documents (paths relative to
// the indexed folder) that answer it.
type EvalQuery struct {
	Query    string   `json:"query"`
	Relevant []string `json:"relevant"`
}

// Quality is document-level retrieval quality: recall at 1, 5 and 20,
// mean reciprocal rank of the first relevant document, and nDCG@10 with
// binary relevance.
type Quality struct {
	Recall1  float64 `json:"recall@1"`
	Recall5  float64 `json:"recall@5"`
	Recall20 float64 `json:"recall@20"`
	MRR      float64 `json:"mrr"`
	NDCG10   float64 `json:"ndcg@10"`
}

// EvalReport compares the retrievers on the same queries.
type EvalReport struct {
	Queries int     `json:"queries"`
	BM25    Quality `json:"bm25"`
	Vector  Quality `json:"vector"`
	Hybrid  Quality `json:"hybrid"`
	// Baseline is the plain FTS5 retriever (store.Baseline), when asked for.
	Baseline *Quality `json:"baseline_fts5,omitempty"`
	// Candidates is the candidate depth searched; SearchP50Ms and
	// SearchP95Ms the hybrid search's latency (embedding, both retrievers
	// and fusion; result cache off).
	Candidates  int     `json:"candidates"`
	SearchP50Ms float64 `json:"search_p50_ms"`
	SearchP95Ms float64 `json:"search_p95_ms"`
	// Rerank is the hybrid list with its first RerankK passages reordered by the
	// rerank model, when one is loaded and EvalOptions.RerankK asks for it;
	// RerankP50Ms and RerankP95Ms the reranker's time per question.
	Rerank      *Quality `json:"rerank,omitempty"`
	RerankK     int      `json:"rerank_k,omitempty"`
	RerankP50Ms float64  `json:"rerank_p50_ms,omitempty"`
	RerankP95Ms float64  `json:"rerank_p95_ms,omitempty"`
	// Ranks holds, per query, the rank of its first relevant document for
	// each retriever (0: not found).
	Ranks []QueryRanks `json:"ranks"`
}

// QueryRanks is where one query's first relevant document came.
type QueryRanks struct {
	Query    string `json:"query"`
	BM25     int    `json:"bm25"`
	Vector   int    `json:"vector"`
	Hybrid   int    `json:"hybrid"`
	Baseline int    `json:"baseline_fts5,omitempty"`
	Rerank   int    `json:"rerank,omitempty"`
}

// EvalOptions is how EvalRetrieval searches and what it compares.
type EvalOptions struct {
	Baseline bool // also the plain FTS5 baseline over the same files
	// Candidates is how many chunks each retriever passes to fusion
	// (retrieve.Options.Candidates); 0 means 100.
	Candidates int
	// RerankK, when positive, also reranks each question's first RerankK
	// passages with the rerank model (an error when none is loaded).
	RerankK int
}

// ReadEvalQueries reads JSON lines of EvalQuery.
func ReadEvalQueries(r io.Reader) ([]EvalQuery, error) {
	var qs []EvalQuery
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var q EvalQuery
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if q.Query == "" || len(q.Relevant) == 0 {
			return nil, fmt.Errorf("line %d: needs a query and at least one relevant path", n)
		}
		qs = append(qs, q)
	}
	return qs, sc.Err()
}

// EvalRetrieval runs each query once with a wide candidate list and ranks
// documents three ways: by BM25 rank, by vector rank, and fused; with
// opt.Baseline, also by the plain FTS5 baseline built over the workspace's
// files. A relevant path that is not in the workspace is an error: a typo
// in a label would otherwise read as a retrieval miss.
func (a *App) EvalRetrieval(ctx context.Context, workspace string, qs []EvalQuery, opt EvalOptions) (EvalReport, error) {
	if opt.Candidates <= 0 {
		opt.Candidates = 100
	}
	rep := EvalReport{Queries: len(qs), Candidates: opt.Candidates}
	ws, err := a.lookup(ctx, workspace)
	if err != nil {
		return rep, err
	}
	docs, err := a.workspaceDocs(ctx, ws.ID)
	if err != nil {
		return rep, err
	}
	for _, q := range qs {
		for _, r := range q.Relevant {
			if _, ok := docs[relKey(r)]; !ok {
				return rep, fmt.Errorf("query %q: %s is not a document of workspace %q", q.Query, r, ws.Name)
			}
		}
	}
	var base *store.Baseline
	if opt.Baseline {
		if base, err = buildBaseline(ctx, docs); err != nil {
			return rep, err
		}
		defer base.Close()
	}
	m, let := a.hold()
	defer let()
	if opt.RerankK > 0 && m.rerank == nil {
		return rep, errors.New("eval: --rerank-k needs a rerank model (--rerank-model FILE)")
	}
	var sums [5]Quality // bm25, vector, hybrid, baseline, rerank
	var took, reranked []float64
	for _, q := range qs {
		t := time.Now()
		res, err := m.retriever.Search(ctx, ws.ID, q.Query, retrieve.Options{TopK: 2 * opt.Candidates, Candidates: opt.Candidates, NoCache: true})
		if err != nil {
			return rep, fmt.Errorf("query %q: %w", q.Query, err)
		}
		took = append(took, float64(time.Since(t))/1e6)
		rel := map[string]bool{}
		for _, r := range q.Relevant {
			rel[relKey(r)] = true
		}
		rank := func(key func(retrieve.Passage) int) []string {
			ps := append([]retrieve.Passage(nil), res.Passages...)
			sort.SliceStable(ps, func(i, j int) bool { return key(ps[i]) < key(ps[j]) })
			var docs []string
			seen := map[string]bool{}
			for _, p := range ps {
				if key(p) == 1<<30 {
					break
				}
				d := relKey(p.Rel)
				if !seen[d] {
					seen[d] = true
					docs = append(docs, d)
				}
			}
			return docs
		}
		orNone := func(r int) int {
			if r == 0 {
				return 1 << 30
			}
			return r
		}
		order := map[int64]int{}
		for i, p := range res.Passages {
			order[p.ChunkID] = i + 1
		}
		lists := [][]string{
			rank(func(p retrieve.Passage) int { return orNone(p.Scores.BM25Rank) }),
			rank(func(p retrieve.Passage) int { return orNone(p.Scores.VectorRank) }),
			rank(func(p retrieve.Passage) int { return order[p.ChunkID] }),
		}
		if base != nil {
			l, err := base.Search(ctx, q.Query, 200)
			if err != nil {
				return rep, err
			}
			lists = append(lists, l)
		} else {
			lists = append(lists, nil)
		}
		if opt.RerankK > 0 {
			rr := res
			rr.Passages = slices.Clone(res.Passages)
			d, err := m.retriever.Rerank(ctx, m.rerank, q.Query, &rr, opt.RerankK)
			if err != nil {
				return rep, fmt.Errorf("query %q: %w", q.Query, err)
			}
			reranked = append(reranked, float64(d)/1e6)
			lists = append(lists, passageDocs(rr.Passages))
		}
		var first [5]int
		for i, l := range lists {
			if l == nil {
				continue
			}
			qq := quality(l, rel)
			s := &sums[i]
			s.Recall1, s.Recall5, s.Recall20 = s.Recall1+qq.Recall1, s.Recall5+qq.Recall5, s.Recall20+qq.Recall20
			s.MRR, s.NDCG10 = s.MRR+qq.MRR, s.NDCG10+qq.NDCG10
			first[i] = firstRelevant(l, rel)
		}
		rep.Ranks = append(rep.Ranks, QueryRanks{Query: q.Query, BM25: first[0], Vector: first[1], Hybrid: first[2], Baseline: first[3], Rerank: first[4]})
	}
	n := float64(max(len(qs), 1))
	avg := func(s Quality) Quality {
		return Quality{round(s.Recall1 / n), round(s.Recall5 / n), round(s.Recall20 / n), round(s.MRR / n), round(s.NDCG10 / n)}
	}
	rep.BM25, rep.Vector, rep.Hybrid = avg(sums[0]), avg(sums[1]), avg(sums[2])
	if base != nil {
		b := avg(sums[3])
		rep.Baseline = &b
	}
	if p := store.Percentile(took); p.N > 0 {
		rep.SearchP50Ms, rep.SearchP95Ms = round(p.P50), round(p.P95)
	}
	if opt.RerankK > 0 {
		r := avg(sums[4])
		rep.Rerank, rep.RerankK = &r, opt.RerankK
		if p := store.Percentile(reranked); p.N > 0 {
			rep.RerankP50Ms, rep.RerankP95Ms = round(p.P50), round(p.P95)
		}
	}
	return rep, nil
}

// passageDocs lists the documents of passages in order of their first passage.
func passageDocs(ps []retrieve.Passage) []string {
	var docs []string
	seen := map[string]bool{}
	for _, p := range ps {
		if d := relKey(p.Rel); !seen[d] {
			seen[d] = true
			docs = append(docs, d)
		}
	}
	return docs
}

func relKey(p string) string { return filepath.ToSlash(filepath.Clean(p)) }

// workspaceDocs returns the workspace's indexed documents by path
// relative to their folder, the way labels name them.
func (a *App) workspaceDocs(ctx context.Context, ws int64) (map[string]store.Document, error) {
	folders, err := a.db.Folders(ctx, ws)
	if err != nil {
		return nil, err
	}
	out := map[string]store.Document{}
	for _, f := range folders {
		ds, err := a.db.DocumentsByFolder(ctx, f.ID)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			if d.Status != store.StatusIndexed {
				continue // not searchable: a label naming it is an error
			}
			k := relKey(d.Rel)
			if o, ok := out[k]; ok {
				return nil, fmt.Errorf("%s and %s: two folders hold %s, so a label naming it is ambiguous", o.Path, d.Path, k)
			}
			out[k] = d
		}
	}
	return out, nil
}

// buildBaseline indexes the documents' files as they are on disk: the
// baseline is plain FTS5 over files, so it suits text formats (a PDF or
// DOCX goes in as its bytes).
func buildBaseline(ctx context.Context, docs map[string]store.Document) (*store.Baseline, error) {
	b, err := store.NewBaseline(ctx)
	if err != nil {
		return nil, err
	}
	rels := slices.Sorted(maps.Keys(docs)) // ties break in the same order every run
	for _, rel := range rels {
		d := docs[rel]
		text, err := os.ReadFile(d.Path)
		if err == nil {
			err = b.Add(ctx, rel, string(text))
		}
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("baseline: %w", err)
		}
	}
	return b, nil
}

// quality scores one ranked list of documents against the relevant set.
func quality(docs []string, rel map[string]bool) Quality {
	q := Quality{Recall1: recallAt(docs, rel, 1), Recall5: recallAt(docs, rel, 5), Recall20: recallAt(docs, rel, 20)}
	if r := firstRelevant(docs, rel); r > 0 {
		q.MRR = 1 / float64(r)
	}
	var dcg, ideal float64
	for i := range min(10, len(docs)) {
		if rel[docs[i]] {
			dcg += 1 / math.Log2(float64(i+2))
		}
	}
	for i := range min(10, len(rel)) {
		ideal += 1 / math.Log2(float64(i+2))
	}
	if ideal > 0 {
		q.NDCG10 = dcg / ideal
	}
	return q
}

func recallAt(docs []string, rel map[string]bool, k int) float64 {
	hit := 0
	for i, d := range docs {
		if i == k {
			break
		}
		if rel[d] {
			hit++
		}
	}
	return float64(hit) / float64(len(rel))
}

// firstRelevant is the 1-based rank of the first relevant document, 0
// when none is listed.
func firstRelevant(docs []string, rel map[string]bool) int {
	for i, d := range docs {
		if rel[d] {
			return i + 1
		}
	}
	return 0
}
