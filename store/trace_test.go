package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	seq := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(n - i) // reversed: Percentile must sort
		}
		return v
	}
	for _, tc := range []struct {
		name string
		in   []float64
		want Percentiles
	}{
		{"empty", nil, Percentiles{}},
		{"one", []float64{7}, Percentiles{1, 7, 7, 7}},
		{"two", []float64{2, 1}, Percentiles{2, 1, 2, 2}},
		{"ten", seq(10), Percentiles{10, 5, 10, 10}},
		{"hundred", seq(100), Percentiles{100, 50, 95, 99}},
		{"thousand", seq(1000), Percentiles{1000, 500, 950, 990}},
		{"twenty", seq(20), Percentiles{20, 10, 19, 20}},
	} {
		if got := Percentile(tc.in); got != tc.want {
			t.Errorf("%s: Percentile = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestPromptBucket(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "<512"}, {511, "<512"}, {512, "512-1023"}, {1024, "1024-2047"}, {4095, "2048-4095"}, {4096, ">=4096"}} {
		if got := PromptBucket(tc.n); got != tc.want {
			t.Errorf("PromptBucket(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestTracesAndStageStats(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	db := fx.db
	other, _ := db.EnsureWorkspace(ctx, "other")
	base := time.Now().Add(-time.Hour)
	// 100 traces: retrieve = i ms, generate = 10·i ms; the first 50 short prompts at
	// fallback 0, the rest long prompts at fallback 1. Only even ones have a rerank stage.
	for i := 1; i <= 100; i++ {
		tr := TraceRecord{
			RequestID: fmt.Sprint("req-", i), WorkspaceID: fx.ws.ID, Created: base.Add(time.Duration(i) * time.Second),
			TTFTms: float64(i), TotalMs: float64(100 * i), PromptTokens: 100,
			Stages: map[string]float64{"retrieve": float64(i), "generate": float64(10 * i)},
			JSON:   []byte(fmt.Sprintf(`{"i":%d}`, i)),
		}
		if i > 50 {
			tr.FallbackLevel, tr.PromptTokens = 1, 3000
		}
		if i%2 == 0 {
			tr.Stages["rerank"] = float64(i)
		}
		if err := db.PutTrace(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	// Another workspace's slow trace must not count.
	db.PutTrace(ctx, TraceRecord{RequestID: "x", WorkspaceID: other.ID, TotalMs: 1e9, Stages: map[string]float64{"retrieve": 1e9}})
	if err := db.PutTrace(ctx, TraceRecord{}); err == nil {
		t.Error("trace without request id accepted")
	}

	st, err := db.StageStats(ctx, fx.ws.ID, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name string
		got  Percentiles
		want Percentiles
	}{
		{"all ttft", st.All.TTFT, Percentiles{100, 50, 95, 99}},
		{"all total", st.All.Total, Percentiles{100, 5000, 9500, 9900}},
		{"all retrieve", st.All.Stages["retrieve"], Percentiles{100, 50, 95, 99}},
		{"all generate", st.All.Stages["generate"], Percentiles{100, 500, 950, 990}},
		{"all rerank", st.All.Stages["rerank"], Percentiles{50, 50, 96, 100}},
		{"short retrieve", st.ByPromptBucket["<512"].Stages["retrieve"], Percentiles{50, 25, 48, 50}},
		{"long retrieve", st.ByPromptBucket["2048-4095"].Stages["retrieve"], Percentiles{50, 75, 98, 100}},
		{"fallback 0 ttft", st.ByFallback[0].TTFT, Percentiles{50, 25, 48, 50}},
		{"fallback 1 ttft", st.ByFallback[1].TTFT, Percentiles{50, 75, 98, 100}},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %+v, want %+v", c.name, c.got, c.want)
		}
	}
	if st.All.N != 100 || len(st.ByPromptBucket) != 2 || len(st.ByFallback) != 2 {
		t.Errorf("groups: N=%d buckets=%d fallbacks=%d", st.All.N, len(st.ByPromptBucket), len(st.ByFallback))
	}
	// since filters by creation time.
	recent, err := db.StageStats(ctx, fx.ws.ID, base.Add(91*time.Second))
	if err != nil || recent.All.N != 10 || recent.All.TTFT.P50 != 95 {
		t.Errorf("since-filtered stats = %+v, %v", recent.All, err)
	}

	trs, err := db.Traces(ctx, TraceFilter{WorkspaceID: fx.ws.ID, Limit: 3})
	if err != nil || len(trs) != 3 || trs[0].RequestID != "req-100" || trs[0].Stages["rerank"] != 100 || string(trs[0].JSON) != `{"i":100}` {
		t.Errorf("Traces = %+v, %v", trs, err)
	}
	one, err := db.Traces(ctx, TraceFilter{RequestID: "req-7"})
	if err != nil || len(one) != 1 || one[0].TTFTms != 7 || len(one[0].Stages) != 2 || !one[0].Created.Equal(base.Add(7*time.Second)) {
		t.Errorf("Traces(req-7) = %+v, %v", one, err)
	}
	// Writing the same request again replaces it, stages included.
	db.PutTrace(ctx, TraceRecord{RequestID: "req-7", WorkspaceID: fx.ws.ID, Created: base, Stages: map[string]float64{"only": 1}})
	one, _ = db.Traces(ctx, TraceFilter{RequestID: "req-7"})
	if len(one) != 1 || len(one[0].Stages) != 1 || one[0].Stages["only"] != 1 {
		t.Errorf("replaced trace = %+v", one)
	}
}
