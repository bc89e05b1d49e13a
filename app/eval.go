package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"

	"lore/index/retrieve"
)

// EvalQuery is one labelled question: the documents (paths relative to
// the indexed folder) that answer it.
type EvalQuery struct {
	Query    string   `json:"query"`
	Relevant []string `json:"relevant"`
}

// Quality is recall@5, recall@20 and mean reciprocal rank at document level.
type Quality struct {
	Recall5  float64 `json:"recall@5"`
	Recall20 float64 `json:"recall@20"`
	MRR      float64 `json:"mrr"`
}

// EvalReport compares the retrievers on the same queries.
type EvalReport struct {
	Queries int     `json:"queries"`
	BM25    Quality `json:"bm25"`
	Vector  Quality `json:"vector"`
	Hybrid  Quality `json:"hybrid"`
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
// documents three ways: by BM25 rank, by vector rank, and fused.
func (a *App) EvalRetrieval(ctx context.Context, workspace string, qs []EvalQuery) (EvalReport, error) {
	rep := EvalReport{Queries: len(qs)}
	ws, err := a.lookup(ctx, workspace)
	if err != nil {
		return rep, err
	}
	m, let := a.hold()
	defer let()
	var bm, vec, hyb []float64 // reciprocal ranks
	var bm5, bm20, vec5, vec20, hyb5, hyb20 float64
	for _, q := range qs {
		res, err := m.retriever.Search(ctx, ws.ID, q.Query, retrieve.Options{TopK: 200, Candidates: 100, NoCache: true})
		if err != nil {
			return rep, fmt.Errorf("query %q: %w", q.Query, err)
		}
		rel := map[string]bool{}
		for _, r := range q.Relevant {
			rel[filepath.ToSlash(filepath.Clean(r))] = true
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
				d := filepath.ToSlash(p.Rel)
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
		for _, set := range []struct {
			docs    []string
			r5, r20 *float64
			rr      *[]float64
		}{
			{rank(func(p retrieve.Passage) int { return orNone(p.Scores.BM25Rank) }), &bm5, &bm20, &bm},
			{rank(func(p retrieve.Passage) int { return orNone(p.Scores.VectorRank) }), &vec5, &vec20, &vec},
			{rank(func(p retrieve.Passage) int { return order[p.ChunkID] }), &hyb5, &hyb20, &hyb},
		} {
			*set.r5 += recallAt(set.docs, rel, 5)
			*set.r20 += recallAt(set.docs, rel, 20)
			*set.rr = append(*set.rr, reciprocalRank(set.docs, rel))
		}
	}
	n := float64(max(len(qs), 1))
	rep.BM25 = Quality{round(bm5 / n), round(bm20 / n), round(mean(bm))}
	rep.Vector = Quality{round(vec5 / n), round(vec20 / n), round(mean(vec))}
	rep.Hybrid = Quality{round(hyb5 / n), round(hyb20 / n), round(mean(hyb))}
	return rep, nil
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

func reciprocalRank(docs []string, rel map[string]bool) float64 {
	for i, d := range docs {
		if rel[d] {
			return 1 / float64(i+1)
		}
	}
	return 0
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
