package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// TraceRecord is one answered request: a few indexed numbers for percentile queries plus
// the full trace as opaque JSON.
type TraceRecord struct {
	RequestID     string             `json:"request_id"`
	WorkspaceID   int64              `json:"workspace_id"` // 0: none
	Created       time.Time          `json:"created"`
	TTFTms        float64            `json:"ttft_ms"`
	TotalMs       float64            `json:"total_ms"`
	FallbackLevel int                `json:"fallback_level"`
	PromptTokens  int                `json:"prompt_tokens"`
	Stages        map[string]float64 `json:"stages"` // stage name → milliseconds
	JSON          []byte             `json:"json,omitempty"`
}

// PutTrace stores a trace. A RequestID already stored is replaced.
func (db *DB) PutTrace(ctx context.Context, t TraceRecord) error {
	if t.RequestID == "" {
		return errors.New("store: put trace: empty request id")
	}
	if t.Created.IsZero() {
		t.Created = time.Now()
	}
	var ws any
	if t.WorkspaceID != 0 {
		ws = t.WorkspaceID
	}
	err := db.tx(ctx, func(tx *sql.Tx) error {
		var id int64
		err := tx.QueryRowContext(ctx, `INSERT INTO traces (request_id, workspace_id, created, ttft_ms, total_ms, fallback_level, prompt_tokens, json)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (request_id) DO UPDATE SET workspace_id = excluded.workspace_id, created = excluded.created,
				ttft_ms = excluded.ttft_ms, total_ms = excluded.total_ms, fallback_level = excluded.fallback_level,
				prompt_tokens = excluded.prompt_tokens, json = excluded.json
			RETURNING id`,
			t.RequestID, ws, toNanos(t.Created), t.TTFTms, t.TotalMs, t.FallbackLevel, t.PromptTokens, t.JSON).Scan(&id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM trace_stages WHERE trace_id = ?`, id); err != nil {
			return err
		}
		for name, ms := range t.Stages {
			if _, err := tx.ExecContext(ctx, `INSERT INTO trace_stages (trace_id, stage, ms) VALUES (?, ?, ?)`, id, name, ms); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: put trace %q: %w", t.RequestID, err)
	}
	return nil
}

// TraceFilter selects traces; zero fields do not filter.
type TraceFilter struct {
	WorkspaceID int64
	RequestID   string
	Since       time.Time // inclusive
	Until       time.Time // exclusive
	Limit       int       // default 100
}

// Traces returns matching traces, newest first.
func (db *DB) Traces(ctx context.Context, f TraceFilter) ([]TraceRecord, error) {
	where, args := traceWhere(f.WorkspaceID, f.Since, f.Until)
	if f.RequestID != "" {
		where = append(where, "request_id = ?")
		args = append(args, f.RequestID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	args = append(args, limit)
	rows, err := db.r.QueryContext(ctx, `SELECT id, request_id, coalesce(workspace_id, 0), created, ttft_ms, total_ms,
			fallback_level, prompt_tokens, json
		FROM traces WHERE `+strings.Join(where, " AND ")+` ORDER BY created DESC, id DESC LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: traces: %w", err)
	}
	var out []TraceRecord
	var ids []int64
	for rows.Next() {
		var t TraceRecord
		var id, created int64
		if err := rows.Scan(&id, &t.RequestID, &t.WorkspaceID, &created, &t.TTFTms, &t.TotalMs,
			&t.FallbackLevel, &t.PromptTokens, &t.JSON); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: traces: %w", err)
		}
		t.Created = fromNanos(created)
		t.Stages = map[string]float64{}
		out = append(out, t)
		ids = append(ids, id)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return nil, fmt.Errorf("store: traces: %w", err)
	}
	for i, id := range ids {
		if err := db.stagesOf(ctx, id, out[i].Stages); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (db *DB) stagesOf(ctx context.Context, traceID int64, into map[string]float64) error {
	rows, err := db.r.QueryContext(ctx, `SELECT stage, ms FROM trace_stages WHERE trace_id = ?`, traceID)
	if err != nil {
		return fmt.Errorf("store: trace stages: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var ms float64
		if err := rows.Scan(&name, &ms); err != nil {
			return fmt.Errorf("store: trace stages: %w", err)
		}
		into[name] = ms
	}
	return rows.Err()
}

func traceWhere(ws int64, since, until time.Time) ([]string, []any) {
	where, args := []string{"1"}, []any{}
	if ws != 0 {
		where = append(where, "workspace_id = ?")
		args = append(args, ws)
	}
	if !since.IsZero() {
		where = append(where, "created >= ?")
		args = append(args, toNanos(since))
	}
	if !until.IsZero() {
		where = append(where, "created < ?")
		args = append(args, toNanos(until))
	}
	return where, args
}

// Percentiles are nearest-rank percentiles of N samples, in milliseconds.
type Percentiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// Stats are percentiles of a group of traces: time to first token, total time, and each
// stage (over the traces that recorded it).
type Stats struct {
	N      int                    `json:"n"`
	TTFT   Percentiles            `json:"ttft"`
	Total  Percentiles            `json:"total"`
	Stages map[string]Percentiles `json:"stages"`
}

// StageStats groups percentiles three ways: all traces, by prompt-length bucket (see
// PromptBucket) and by fallback level.
type StageStats struct {
	All            Stats            `json:"all"`
	ByPromptBucket map[string]Stats `json:"by_prompt_bucket"`
	ByFallback     map[int]Stats    `json:"by_fallback"`
}

// PromptBucket names the prompt-length group a trace falls in; prefill cost grows with
// prompt length, so latencies are only comparable within a bucket.
func PromptBucket(tokens int) string {
	switch {
	case tokens < 512:
		return "<512"
	case tokens < 1024:
		return "512-1023"
	case tokens < 2048:
		return "1024-2047"
	case tokens < 4096:
		return "2048-4095"
	}
	return ">=4096"
}

// StageStats computes P50/P95/P99 over the workspace's traces created at or after since
// (ws 0: all workspaces; zero since: all time).
func (db *DB) StageStats(ctx context.Context, ws int64, since time.Time) (StageStats, error) {
	where, args := traceWhere(ws, since, time.Time{})
	cond := strings.Join(where, " AND ")
	type sample struct {
		ttft, total float64
		fallback    int
		bucket      string
		stages      map[string]float64
	}
	byID := map[int64]*sample{}
	var order []int64
	rows, err := db.r.QueryContext(ctx, `SELECT id, ttft_ms, total_ms, fallback_level, prompt_tokens FROM traces WHERE `+cond, args...)
	if err != nil {
		return StageStats{}, fmt.Errorf("store: stage stats: %w", err)
	}
	for rows.Next() {
		var id int64
		var s sample
		var tokens int
		if err := rows.Scan(&id, &s.ttft, &s.total, &s.fallback, &tokens); err != nil {
			rows.Close()
			return StageStats{}, fmt.Errorf("store: stage stats: %w", err)
		}
		s.bucket = PromptBucket(tokens)
		s.stages = map[string]float64{}
		byID[id] = &s
		order = append(order, id)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return StageStats{}, fmt.Errorf("store: stage stats: %w", err)
	}
	rows, err = db.r.QueryContext(ctx, `SELECT s.trace_id, s.stage, s.ms FROM trace_stages s
		JOIN traces ON traces.id = s.trace_id WHERE `+cond, args...)
	if err != nil {
		return StageStats{}, fmt.Errorf("store: stage stats: %w", err)
	}
	for rows.Next() {
		var id int64
		var name string
		var ms float64
		if err := rows.Scan(&id, &name, &ms); err != nil {
			rows.Close()
			return StageStats{}, fmt.Errorf("store: stage stats: %w", err)
		}
		if s := byID[id]; s != nil { // a trace written between the two queries is ignored
			s.stages[name] = ms
		}
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return StageStats{}, fmt.Errorf("store: stage stats: %w", err)
	}

	type acc struct {
		ttft, total []float64
		stages      map[string][]float64
	}
	add := func(a *acc, s *sample) {
		a.ttft = append(a.ttft, s.ttft)
		a.total = append(a.total, s.total)
		for name, ms := range s.stages {
			a.stages[name] = append(a.stages[name], ms)
		}
	}
	newAcc := func() *acc { return &acc{stages: map[string][]float64{}} }
	all := newAcc()
	buckets := map[string]*acc{}
	fallbacks := map[int]*acc{}
	for _, id := range order {
		s := byID[id]
		add(all, s)
		if buckets[s.bucket] == nil {
			buckets[s.bucket] = newAcc()
		}
		add(buckets[s.bucket], s)
		if fallbacks[s.fallback] == nil {
			fallbacks[s.fallback] = newAcc()
		}
		add(fallbacks[s.fallback], s)
	}
	stats := func(a *acc) Stats {
		st := Stats{N: len(a.total), TTFT: Percentile(a.ttft), Total: Percentile(a.total), Stages: map[string]Percentiles{}}
		for name, v := range a.stages {
			st.Stages[name] = Percentile(v)
		}
		return st
	}
	out := StageStats{All: stats(all), ByPromptBucket: map[string]Stats{}, ByFallback: map[int]Stats{}}
	for b, a := range buckets {
		out.ByPromptBucket[b] = stats(a)
	}
	for f, a := range fallbacks {
		out.ByFallback[f] = stats(a)
	}
	return out, nil
}

// Percentile computes nearest-rank P50/P95/P99 of v (which it sorts): the p-th percentile
// is the smallest sample with at least p% of samples at or below it.
func Percentile(v []float64) Percentiles {
	p := Percentiles{N: len(v)}
	if len(v) == 0 {
		return p
	}
	slices.Sort(v)
	rank := func(q int) float64 {
		r := (q*len(v) + 99) / 100 // ceil(q/100 · n) without float rounding
		return v[max(r, 1)-1]
	}
	p.P50, p.P95, p.P99 = rank(50), rank(95), rank(99)
	return p
}
