package server_test

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"lore/app"
	"lore/app/server"
	"lore/app/telemetry"
)

// otlpReceiver is a minimal OTLP/HTTP trace receiver on loopback.
type otlpReceiver struct {
	mu       sync.Mutex
	requests int
	badType  []string
	spans    map[string]int // span name → count
	errs     []error
}

func startReceiver(t *testing.T) (*otlpReceiver, string) {
	t.Helper()
	rc := &otlpReceiver{spans: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.requests++
		if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
			rc.badType = append(rc.badType, ct)
		}
		var req coltrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &req)
		}
		if err != nil {
			rc.errs = append(rc.errs, err)
			http.Error(w, err.Error(), 400)
			return
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					rc.spans[sp.Name]++
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Write(out)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return rc, "http://" + ln.Addr().String()
}

func TestTelemetry(t *testing.T) {
	rc, endpoint := startReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	ctx := context.Background()
	tel, err := telemetry.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	flushed := false
	t.Cleanup(func() {
		if !flushed {
			tel.Shutdown(context.Background())
		}
	})
	e := newEnv(t, app.Config{Tracer: tel.Tracer, OnTrace: tel.OnTrace}, server.Options{Metrics: tel.Metrics})
	e.setMaxTokens(t, 64)
	// Speculation never switched off, so each answer records the route's acceptance.
	if code := e.do(t, e.req(t, "PUT", "/api/settings", map[string]int{"speculate": 4, "spec_floor_pct": 0}), nil); code != 200 {
		t.Fatalf("PUT /api/settings speculate: %d", code)
	}
	const asks = 2
	for range asks {
		e.mustAsk(t, map[string]any{"question": "what about the river energy?"})
	}

	t.Run("metrics", func(t *testing.T) {
		r, _ := http.NewRequest("GET", e.base+"/metrics", nil)
		if code := e.do(t, r, nil); code != 401 {
			t.Errorf("/metrics without the token: %d, want 401", code)
		}
		resp, err := e.client.Do(e.req(t, "GET", "/metrics", nil))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("/metrics: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		text := string(b)
		if !strings.Contains(text, "# TYPE lore_stage_duration") || !strings.Contains(text, "histogram") {
			t.Fatalf("no lore_stage_duration histogram in:\n%.2000s", text)
		}
		for _, want := range []string{`lore_draft_accept_rate{`, `lore_draft_tokens_total{`} {
			found := false
			for _, line := range strings.Split(text, "\n") {
				found = found || strings.HasPrefix(line, want) && strings.Contains(line, `route="main"`)
			}
			if !found {
				t.Errorf("no %s…route=\"main\"} line in /metrics:\n%.3000s", want, text)
			}
		}
		for _, stage := range []string{"queue", "retrieval", "prefill", "llm_ttft", "ttft", "decode", "total"} {
			bucket, count := false, false
			for _, line := range strings.Split(text, "\n") {
				if !strings.HasPrefix(line, "lore_stage_duration") || !strings.Contains(line, `stage="`+stage+`"`) {
					continue
				}
				if strings.Contains(line, "_bucket{") && strings.Contains(line, `le="+Inf"`) &&
					strings.HasSuffix(line, fmt.Sprintf(" %d", asks)) {
					bucket = true
				}
				if strings.Contains(line, "_count{") && strings.HasSuffix(line, fmt.Sprintf(" %d", asks)) {
					count = true
				}
			}
			if !bucket || !count {
				t.Errorf("stage %q: +Inf bucket %v, count %v (want %d observations)", stage, bucket, count, asks)
			}
		}
	})

	t.Run("otlp spans", func(t *testing.T) {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		tel.Shutdown(sctx) // flushes the batch exporter
		flushed = true
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if rc.requests == 0 {
			t.Fatal("the receiver got no export")
		}
		if len(rc.badType) > 0 || len(rc.errs) > 0 {
			t.Errorf("content types %v, decode errors %v", rc.badType, rc.errs)
		}
		t.Logf("%d exports, spans %v", rc.requests, rc.spans)
		for _, name := range []string{"ask", "queue", "retrieval", "prompt_assemble", "prefill", "decode"} {
			if rc.spans[name] < asks {
				t.Errorf("span %q exported %d times, want %d (one per question)", name, rc.spans[name], asks)
			}
		}
	})
}
