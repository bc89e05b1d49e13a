package retrieve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// DefaultRerankK is how many passages Rerank scores when asked for k <= 0.
// A cross-encoder's cost grows with k (NOTES: top-20 about 0.5 s with a
// MiniLM-class model on a laptop), so it stays small.
const DefaultRerankK = 20

// Rerank reorders the first k passages of res by rr's scores, best first,
// and sets their Scores.Rerank; the passages after them keep their order.
// It never sends more than k passages (nor more than res holds) and returns
// how long the reranker took. On error res is left as it was.
func (r *Retriever) Rerank(ctx context.Context, rr Reranker, query string, res *Result, k int) (time.Duration, error) {
	if rr == nil || res == nil {
		return 0, errors.New("retrieve: rerank: no reranker or result")
	}
	if k <= 0 {
		k = DefaultRerankK
	}
	k = min(k, len(res.Passages))
	if k == 0 {
		return 0, nil
	}
	docs := make([]string, k)
	for i := range docs {
		docs[i] = res.Passages[i].Text
	}
	start := time.Now()
	scores, err := rr.Rerank(ctx, query, docs)
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("retrieve: rerank with %s: %w", rr.ID(), err)
	}
	if len(scores) != k {
		return d, fmt.Errorf("retrieve: rerank with %s: %d scores for %d passages", rr.ID(), len(scores), k)
	}
	head := res.Passages[:k]
	for i := range head {
		s := float64(scores[i])
		if math.IsNaN(s) {
			s = math.Inf(-1) // a broken score sorts last rather than anywhere
		}
		head[i].Scores.Rerank = s
	}
	slices.SortStableFunc(head, func(a, b Passage) int { return cmp.Compare(b.Scores.Rerank, a.Scores.Rerank) })
	return d, nil
}
