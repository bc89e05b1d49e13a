package store_test

import (
	"context"
	"os"
	"sort"
	"testing"
	"time"
)

func TestExp2(t *testing.T) {
	if os.Getenv("EXP") == "" {
		t.Skip()
	}
	db, _ := benchDB(t, 100000)
	r := db.ReadPool()
	ctx := context.Background()
	timeit := func(name, q string, args ...any) {
		var ds []time.Duration
		var n int
		for range 9 {
			s := time.Now()
			if err := r.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
				t.Fatal(err)
			}
			ds = append(ds, time.Since(s))
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		t.Logf("%-60s n=%6d p50 %6.2fms", name, n, float64(ds[4])/1e6)
	}
	R := `("mazemi" OR "pozetolo" OR "affect")`
	C := `("nemi")`
	for _, e := range []string{R, C, R + " AND " + C, R + " NOT " + C} {
		timeit("count "+e, `SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?`, e)
		timeit("bm25 "+e, `SELECT count(*) FROM (SELECT bm25(chunks_fts) s FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY s LIMIT 100)`, e)
	}
	var ver string
	r.QueryRowContext(ctx, `SELECT sqlite_version()`).Scan(&ver)
	t.Log("sqlite", ver)
	merged := `WITH a AS MATERIALIZED (SELECT rowid id, bm25(chunks_fts) score FROM chunks_fts WHERE chunks_fts MATCH ?2),
		r AS MATERIALIZED (SELECT rowid id, bm25(chunks_fts) score FROM chunks_fts WHERE chunks_fts MATCH ?1)
		SELECT count(*) FROM (SELECT r.id, coalesce(a.score, r.score) AS s FROM r LEFT JOIN a ON a.id = r.id ORDER BY s, r.id LIMIT 100)`
	timeit("merged", merged, R, R+" AND "+C)
	timeit("union", `SELECT count(*) FROM (SELECT * FROM (SELECT rowid id, bm25(chunks_fts) score FROM chunks_fts WHERE chunks_fts MATCH ?1 ORDER BY score LIMIT 100) UNION ALL SELECT * FROM (SELECT rowid id, bm25(chunks_fts) score FROM chunks_fts WHERE chunks_fts MATCH ?2 ORDER BY score LIMIT 100))`, R+" AND "+C, R+" NOT "+C)
	timeit("full", `SELECT count(*) FROM (SELECT rowid id, bm25(chunks_fts) score FROM chunks_fts WHERE chunks_fts MATCH ?1 ORDER BY score LIMIT 100)`, `"mazemi" OR "pozetolo" OR "affect" OR "nemi"`)
	rows0, _ := r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+merged, R, R+" AND "+C)
	for rows0.Next() { var a, b, c int; var d string; rows0.Scan(&a, &b, &c, &d); t.Log(d) }
	rows0.Close()
	var segs int
	r.QueryRowContext(ctx, `SELECT count(*) FROM chunks_fts_idx`).Scan(&segs)
	t.Log("idx rows", segs)
	rows, _ := r.QueryContext(ctx, `SELECT segid, count(*) FROM chunks_fts_idx GROUP BY segid`)
	n := 0
	for rows.Next() { n++ }
	rows.Close()
	t.Log("segments", n)
}
