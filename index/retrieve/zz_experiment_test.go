package retrieve

// Temporary experiment: to be deleted.

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"lore/store"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestZZExperiment(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("ZZ_CHUNKS"))
	if n == 0 {
		t.Skip()
	}
	ctx := context.Background()
	path := fmt.Sprintf("/tmp/lore-bench/%d.db", n)
	_, statErr := os.Stat(path)
	os.MkdirAll(filepath.Dir(path), 0o755)
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ws int64
	if statErr != nil {
		s := time.Now()
		ws, err = BenchCorpus(ctx, db, CorpusConfig{Chunks: n, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("corpus %s", time.Since(s))
	} else {
		w, _ := db.EnsureWorkspace(ctx, "bench")
		ws = w.ID
	}
	raw, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_query_only=1")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	queries := BenchQueries(60, 2)
	type form struct {
		name string
		fn   func(q string) (int, error)
	}
	rows := func(query string, args ...any) (int, error) {
		rs, err := raw.QueryContext(ctx, query, args...)
		if err != nil {
			return 0, err
		}
		defer rs.Close()
		k := 0
		for rs.Next() {
			k++
		}
		return k, rs.Err()
	}
	forms := []form{
		{"store.SearchBM25", func(q string) (int, error) { h, err := db.SearchBM25(ctx, ws, q, 50); return len(h), err }},
		{"fts only bm25() limit 50", func(q string) (int, error) {
			return rows(`SELECT rowid, bm25(chunks_fts) s FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY s LIMIT 50`, store.MatchQuery(q))
		}},
		{"fts only ORDER BY rank", func(q string) (int, error) {
			return rows(`SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT 50`, store.MatchQuery(q))
		}},
		{"count matches", func(q string) (int, error) {
			return rows(`SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?`, store.MatchQuery(q))
		}},
		{"without common term", func(q string) (int, error) {
			mq := store.MatchQuery(q)
			parts := strings.Split(mq, " OR ")
			return rows(`SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT 50`, strings.Join(parts[1:], " OR "))
		}},
	}
	for _, f := range forms {
		var lat []time.Duration
		c0 := cpuNow()
		total := 0
		for _, q := range queries {
			s := time.Now()
			k, err := f.fn(q)
			if err != nil {
				t.Fatal(f.name, err)
			}
			total += k
			lat = append(lat, time.Since(s))
		}
		cpu := cpuNow() - c0
		slices.Sort(lat)
		t.Logf("%-28s p50 %7.2fms p95 %7.2fms cpu/query %7.2fms rows/query %d", f.name, ms(lat[len(lat)/2]), ms(lat[len(lat)*95/100]),
			ms(cpu)/float64(len(queries)), total/len(queries))
	}
	t.Logf("example query %q → %s", queries[0], store.MatchQuery(queries[0]))
}

func TestZZPrune(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("ZZ_CHUNKS"))
	if n == 0 {
		t.Skip()
	}
	ctx := context.Background()
	path := fmt.Sprintf("/tmp/lore-bench/%d.db", n)
	raw, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetMaxOpenConns(1)
	conn, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, s := range []string{
		`CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts_v USING fts5vocab(chunks_fts, row)`,
		`CREATE VIRTUAL TABLE temp.qtok USING fts5(text, tokenize = 'porter unicode61 remove_diacritics 2')`,
		`CREATE VIRTUAL TABLE temp.qtokv USING fts5vocab(temp, qtok, instance)`,
	} {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			t.Fatal(s, err)
		}
	}
	var total int
	conn.QueryRowContext(ctx, `SELECT count(*) FROM chunks`).Scan(&total)
	prune := func(q string) (string, error) {
		mq := store.MatchQuery(q)
		words := strings.Split(strings.ReplaceAll(mq, `"`, ""), " OR ")
		if _, err := conn.ExecContext(ctx, `DELETE FROM temp.qtok`); err != nil {
			return "", err
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO temp.qtok(rowid, text) VALUES (1, ?)`, strings.Join(words, " ")); err != nil {
			return "", err
		}
		rs, err := conn.QueryContext(ctx, `SELECT v.offset, coalesce(c.doc, 0) FROM temp.qtokv v LEFT JOIN chunks_fts_v c ON c.term = v.term`)
		if err != nil {
			return "", err
		}
		var keep []string
		for rs.Next() {
			var off, df int
			rs.Scan(&off, &df)
			if df*2 <= total && off < len(words) {
				keep = append(keep, `"`+words[off]+`"`)
			}
		}
		rs.Close()
		if len(keep) == 0 {
			return mq, nil
		}
		return strings.Join(keep, " OR "), nil
	}
	top := func(mq string) ([]int64, time.Duration, error) {
		s := time.Now()
		rs, err := conn.QueryContext(ctx, `SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY bm25(chunks_fts) LIMIT 50`, mq)
		if err != nil {
			return nil, 0, err
		}
		defer rs.Close()
		var ids []int64
		for rs.Next() {
			var id int64
			rs.Scan(&id)
			ids = append(ids, id)
		}
		return ids, time.Since(s), rs.Err()
	}
	var full, pruned, pr []time.Duration
	same := 0
	queries := BenchQueries(60, 2)
	for _, q := range queries {
		a, d1, err := top(store.MatchQuery(q))
		if err != nil {
			t.Fatal(err)
		}
		s := time.Now()
		pq, err := prune(q)
		if err != nil {
			t.Fatal(err)
		}
		pr = append(pr, time.Since(s))
		b, d2, err := top(pq)
		if err != nil {
			t.Fatal(err)
		}
		full, pruned = append(full, d1), append(pruned, d2)
		k := min(10, len(a), len(b))
		if slices.Equal(a[:k], b[:k]) {
			same++
		} else if same < 100 {
			t.Logf("DIFF %q: %s → %s\n%v\n%v", q, store.MatchQuery(q), pq, a[:k], b[:k])
			same += 1000
		}
	}
	for _, x := range [][]time.Duration{full, pruned, pr} {
		slices.Sort(x)
	}
	t.Logf("chunks %d: full p50 %.2fms p95 %.2fms | pruned p50 %.2fms p95 %.2fms | prune step p50 %.3fms p95 %.3fms | same top-10 %d/%d",
		total, ms(full[len(full)/2]), ms(full[len(full)*95/100]), ms(pruned[len(pruned)/2]), ms(pruned[len(pruned)*95/100]),
		ms(pr[len(pr)/2]), ms(pr[len(pr)*95/100]), same, len(queries))
	q := queries[0]
	pq, _ := prune(q)
	t.Logf("%q: %s → %s", q, store.MatchQuery(q), pq)
}
