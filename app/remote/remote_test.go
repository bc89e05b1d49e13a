package remote_test

// Faults a real server cannot be made to produce on demand (a 503 then
// success, a stream cut mid-answer, a server that never answers) run
// against small httptest servers here; the real-server tests are in
// app/server (remote_test.go), against lore serve's own /v1.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lore/app/remote"
	"lore/engine"
)

// sse writes chunks as server-sent events, flushing each.
func sse(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, e := range events {
		fmt.Fprintf(w, "data: %s\n\n", e)
		w.(http.Flusher).Flush()
	}
}

func delta(s string) string {
	b, _ := json.Marshal(map[string]any{"choices": []map[string]any{{"delta": map[string]string{"content": s}}}})
	return string(b)
}

const finish = `{"choices":[{"delta":{},"finish_reason":"stop"}]}`

func chat(t *testing.T, url string, o remote.Options) *remote.Chat {
	t.Helper()
	o.URL = url
	if o.Model == "" {
		o.Model = "m"
	}
	if o.Backoff == 0 {
		o.Backoff = 5 * time.Millisecond
	}
	c, err := remote.NewChat(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func generate(c *remote.Chat, ctx context.Context) (string, engine.Stats, error) {
	var b strings.Builder
	st, err := c.Generate(ctx, engine.GenerateRequest{Messages: []engine.Message{{Role: "user", Content: "hi"}}, MaxTokens: 8},
		func(s string) error { b.WriteString(s); return nil })
	return b.String(), st, err
}

func TestGenerateFaults(t *testing.T) {
	refused := func() string { // a port nothing listens on
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return "http://" + addr + "/v1"
	}
	tests := []struct {
		name        string
		handler     func(n int32, w http.ResponseWriter, r *http.Request) // n counts requests from 1
		url         string                                                // instead of a handler
		opts        remote.Options
		answer      string
		requests    int32
		unavailable bool // errors.Is(err, ErrUnavailable): a fallback may answer
		wantErr     string
	}{
		{name: "503 then success", requests: 2, answer: "hello",
			handler: func(n int32, w http.ResponseWriter, r *http.Request) {
				if n == 1 {
					http.Error(w, `{"error":{"message":"loading model"}}`, http.StatusServiceUnavailable)
					return
				}
				sse(w, delta("hel"), delta("lo"), finish, "[DONE]")
			}},
		{name: "429 until retries run out", requests: 3, unavailable: true, wantErr: "HTTP 429: slow down",
			handler: func(n int32, w http.ResponseWriter, r *http.Request) {
				http.Error(w, `{"error":{"message":"slow down"}}`, http.StatusTooManyRequests)
			}},
		{name: "400 is not retried", requests: 1, wantErr: "HTTP 400: bad model",
			handler: func(n int32, w http.ResponseWriter, r *http.Request) {
				http.Error(w, `{"error":{"message":"bad model"}}`, http.StatusBadRequest)
			}},
		{name: "stream dies mid-answer", requests: 1, answer: "partial", wantErr: "mid-answer",
			handler: func(n int32, w http.ResponseWriter, r *http.Request) {
				sse(w, delta("partial"))
				panic(http.ErrAbortHandler) // drops the connection
			}},
		{name: "stream dies before a token", requests: 1, unavailable: true, wantErr: "before any token",
			handler: func(n int32, w http.ResponseWriter, r *http.Request) {
				sse(w, `{"choices":[{"delta":{"role":"assistant"}}]}`)
			}},
		{name: "error object mid-stream", requests: 1, answer: "a", wantErr: "server error mid-stream: boom",
			handler: func(n int32, w http.ResponseWriter, r *http.Request) {
				sse(w, delta("a"), `{"error":{"message":"boom"}}`)
			}},
		{name: "over the TTFT budget", requests: 1, unavailable: true, wantErr: "no token within",
			opts: remote.Options{FirstToken: 100 * time.Millisecond},
			handler: func(n int32, w http.ResponseWriter, r *http.Request) {
				sse(w, `{"choices":[{"delta":{"role":"assistant"}}]}`)
				<-r.Context().Done()
			}},
		{name: "connection refused", url: refused(), unavailable: true, wantErr: "refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			url := tc.url
			if tc.handler != nil {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					tc.handler(n.Add(1), w, r)
				}))
				defer srv.Close()
				url = srv.URL + "/v1"
			}
			got, st, err := generate(chat(t, url, tc.opts), context.Background())
			if got != tc.answer {
				t.Errorf("answer %q, want %q", got, tc.answer)
			}
			if tc.handler != nil && n.Load() != tc.requests {
				t.Errorf("%d requests, want %d", n.Load(), tc.requests)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("err %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
			}
			if errors.Is(err, remote.ErrUnavailable) != tc.unavailable {
				t.Errorf("errors.Is(%v, ErrUnavailable) = %v, want %v", err, !tc.unavailable, tc.unavailable)
			}
			if err == nil && st.ClientTTFT <= 0 {
				t.Errorf("no TTFT measured: %+v", st)
			}
		})
	}
}

// TestGenerateCounts: the server's usage and llama-server's timings fill
// the counts; without them they are Unknown, not 0.
func TestGenerateCounts(t *testing.T) {
	tests := []struct {
		name                   string
		last                   string
		prompt, cached, evalTk int
	}{
		{"none", finish, remote.Unknown, remote.Unknown, remote.Unknown},
		{"usage", `{"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":30}}}`, 40, 30, 10},
		{"usage without cache", `{"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":2}}`, 40, remote.Unknown, remote.Unknown},
		{"timings", `{"choices":[{"delta":{},"finish_reason":"stop"}],"timings":{"cache_n":25,"prompt_n":15,"prompt_ms":12.5,"predicted_n":2,"predicted_ms":4}}`, 40, 25, 15},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var body map[string]any
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				json.NewDecoder(r.Body).Decode(&body)
				sse(w, delta("a"), delta("b"), finish, tc.last, "[DONE]")
			}))
			defer srv.Close()
			_, st, err := generate(chat(t, srv.URL+"/v1", remote.Options{}), context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.PromptTokens != tc.prompt || st.CachedTokens != tc.cached || st.EvalTokens != tc.evalTk {
				t.Errorf("prompt/cached/eval %d/%d/%d, want %d/%d/%d", st.PromptTokens, st.CachedTokens, st.EvalTokens, tc.prompt, tc.cached, tc.evalTk)
			}
			if body["cache_prompt"] != true || body["stream"] != true {
				t.Errorf("request body %v: want stream and cache_prompt true", body)
			}
		})
	}
}

// TestGenerateCancel: cancelling closes the stream, and the server sees it.
func TestGenerateCancel(t *testing.T) {
	closed := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(closed)
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(w, "data: %s\n\n", delta("x")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}))
	defer srv.Close()
	c := chat(t, srv.URL+"/v1", remote.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	st, err := c.Generate(ctx, engine.GenerateRequest{Prompt: "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"}, func(string) error {
		if n++; n == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || errors.Is(err, remote.ErrUnavailable) {
		t.Fatalf("err %v, want context.Canceled and not ErrUnavailable", err)
	}
	if st.StopReason != "cancel" {
		t.Errorf("stop reason %q", st.StopReason)
	}
	select {
	case <-closed:
	case <-time.After(30 * time.Second): // only keeps a broken cancel from hanging the test
		t.Fatal("the server still streams 30 s after the cancel")
	}
}

// TestAPIKey: the key goes in the header and nowhere else.
func TestAPIKey(t *testing.T) {
	const key = "sk-secret-123"
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		// A proxy that echoes the request's header in its error.
		http.Error(w, "rejected: "+auth, http.StatusBadRequest)
	}))
	defer srv.Close()
	c := chat(t, srv.URL+"/v1", remote.Options{APIKey: key})
	_, _, err := generate(c, context.Background())
	if auth != "Bearer "+key {
		t.Errorf("Authorization %q", auth)
	}
	if err == nil || strings.Contains(err.Error(), key) || strings.Contains(c.ID(), key) || strings.Contains(c.Info().Path, key) {
		t.Errorf("key leaked: err %v, id %s", err, c.ID())
	}
	if _, err := remote.NewChat(remote.Options{URL: "http://user:pw@host/v1"}); err != nil {
		t.Fatal(err)
	}
	c2, _ := remote.NewChat(remote.Options{URL: "http://user:pw@host/v1"})
	if strings.Contains(c2.ID(), "pw") {
		t.Errorf("URL credentials in ID %s", c2.ID())
	}
}

func TestParseChatML(t *testing.T) {
	msgs := []engine.Message{{Role: "system", Content: "You answer.\n\nPassages:\n[1] a"}, {Role: "user", Content: "q1"},
		{Role: "assistant", Content: "a1"}, {Role: "user", Content: "q2\nline"}}
	tmpl := engine.TemplateFor("<|im_start|>")
	prompt, err := tmpl.Render(msgs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.ParseChatML(prompt)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(msgs) {
		t.Errorf("ParseChatML(Render(msgs)) = %q, want %q", got, msgs)
	}
	for _, bad := range []string{"plain text", "<|im_start|>user\nunclosed", ""} {
		if _, err := remote.ParseChatML(bad); err == nil {
			t.Errorf("ParseChatML(%q) accepted", bad)
		}
	}
}

func TestEmbedderMismatch(t *testing.T) {
	reply := func(model string, dims ...int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var data []map[string]any
			for i, d := range dims {
				v := make([]float32, d)
				v[0] = 3
				data = append(data, map[string]any{"index": i, "embedding": v})
			}
			json.NewEncoder(w).Encode(map[string]any{"model": model, "data": data})
		}
	}
	tests := []struct {
		name     string
		h        http.HandlerFunc
		indexDim int
		mismatch bool
	}{
		{"same model and dimension", reply("nomic-embed:latest", 4, 4), 4, false},
		{"dimension learnt from the first reply", reply("nomic-embed", 4, 4), 0, false},
		{"another model", reply("bge-small", 4, 4), 4, true},
		{"another dimension than the index", reply("nomic-embed", 8, 8), 4, true},
		{"mixed dimensions", reply("nomic-embed", 4, 8), 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.h)
			defer srv.Close()
			e, err := remote.NewEmbedder(remote.Options{URL: srv.URL + "/v1", Model: "nomic-embed"}, tc.indexDim)
			if err != nil {
				t.Fatal(err)
			}
			vecs, err := e.Embed(context.Background(), []string{"a", "b"})
			if errors.Is(err, remote.ErrMismatch) != tc.mismatch {
				t.Fatalf("err %v, want mismatch %v", err, tc.mismatch)
			}
			if err == nil && (len(vecs) != 2 || vecs[0][0] != 1) {
				t.Errorf("vectors %v: want two, normalised", vecs)
			}
		})
	}
}

// TestPlainKey: the API key is never sent over plain http to another
// machine unless the user allows it; loopback and https are fine.
func TestPlainKey(t *testing.T) {
	for _, c := range []struct {
		url, key string
		allow    bool
		ok       bool
	}{
		{"http://10.1.2.3:8080/v1", "s3cr3t-9", false, false},
		{"http://gpu-box:8080/v1", "s3cr3t-9", false, false},
		{"http://gpu-box:8080/v1", "s3cr3t-9", true, true},
		{"http://gpu-box:8080/v1", "", false, true},
		{"https://gpu-box:8080/v1", "s3cr3t-9", false, true},
		{"http://127.0.0.1:8080/v1", "s3cr3t-9", false, true},
		{"http://localhost:8080/v1", "s3cr3t-9", false, true},
		{"http://[::1]:8080/v1", "s3cr3t-9", false, true},
	} {
		_, err := remote.NewReranker(remote.Options{URL: c.url, Model: "m", APIKey: c.key, PlainKey: c.allow})
		if (err == nil) != c.ok || err != nil && (!strings.Contains(err.Error(), "plain http") || strings.Contains(err.Error(), c.key)) {
			t.Errorf("%s, key %q, allowed %v: %v", c.url, c.key, c.allow, err)
		}
	}
}

// TestRerankBackoff: after a failure the reranker is not asked again
// during its cooldown: calls fail at once, naming the last failure (the
// cooldown's arithmetic is TestBreaker's).
func TestRerankBackoff(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	r, err := remote.NewReranker(remote.Options{URL: srv.URL + "/v1", Model: "m", Retries: -1, Cooldown: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Rerank(ctx, "q", []string{"d"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if _, err := r.Rerank(context.Background(), "q", []string{"d"}); !errors.Is(err, remote.ErrUnavailable) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("failing server: %v", err)
	}
	_, err = r.Rerank(context.Background(), "q", []string{"d"})
	if !errors.Is(err, remote.ErrUnavailable) || !strings.Contains(err.Error(), "after 1 failure(s) in a row") || !strings.Contains(err.Error(), "503") {
		t.Fatalf("within the cooldown: %v, want a refusal that names the last failure", err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("%d requests reached the server, want 1 (a cancelled call counts nothing, a backed-off one sends nothing)", n)
	}
}

// TestRedirectKeepsKey: a redirect that would carry the API key over plain
// http to another machine is refused before anything is sent there.
func TestRedirectKeepsKey(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://192.0.2.1:9/v1/rerank", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	r, err := remote.NewReranker(remote.Options{URL: srv.URL + "/v1", Model: "m", APIKey: "s3cr3t-9", InsecureSkipVerify: true,
		Retries: -1, ConnectTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Rerank(context.Background(), "q", []string{"d"})
	if err == nil || !strings.Contains(err.Error(), "refused a redirect to http://192.0.2.1:9/v1/rerank") || strings.Contains(err.Error(), "s3cr3t-9") {
		t.Fatalf("redirect to plain http: %v", err)
	}
}
