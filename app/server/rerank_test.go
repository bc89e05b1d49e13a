package server_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lore/app"
	"lore/app/remote"
	"lore/app/server"
	"lore/engine/synth"
)

var (
	moreOnce sync.Once
	moreErr  error
)

// moreModels writes, beside fixtures' models, the synthetic reranker
// (Qwen3-Reranker-shaped: scores vary with the pair) and an embedding
// model of another dimension (128, where embed.gguf has 64) but the same
// file name, in a folder of its own.
func moreModels(t testing.TB) (rerank, wideEmbed string) {
	t.Helper()
	fixtures(t)
	rerank, wideEmbed = filepath.Join(fixDir, "rerank.gguf"), filepath.Join(fixDir, "wide", "embed.gguf")
	moreOnce.Do(func() {
		if moreErr = synth.Write(rerank, synth.Options{Shape: "tiny", Reranker: true, Seed: 3}); moreErr != nil {
			return
		}
		if moreErr = os.MkdirAll(filepath.Dir(wideEmbed), 0o755); moreErr != nil {
			return
		}
		moreErr = synth.Write(wideEmbed, synth.Options{Shape: "tiny", Embedding: true, Seed: 4, Width: 128})
	})
	if moreErr != nil {
		t.Fatal(moreErr)
	}
	return rerank, wideEmbed
}

// TestEmbeddingsEndpoint: lore serve's POST /v1/embeddings answers with
// its local embedding model in OpenAI's shape (floats or base64), names
// the model that ran, takes the /v1-only key, and refuses what it cannot
// embed.
func TestEmbeddingsEndpoint(t *testing.T) {
	e := newEnv(t, app.Config{}, server.Options{})
	type reply struct {
		Object string `json:"object"`
		Model  string `json:"model"`
		Data   []struct {
			Object    string `json:"object"`
			Index     int    `json:"index"`
			Embedding any    `json:"embedding"`
		} `json:"data"`
	}
	post := func(body any, key string) (int, reply) {
		r := e.req(t, "POST", "/v1/embeddings", body)
		r.Header.Set("Authorization", "Bearer "+key)
		var out reply
		return e.do(t, r, &out), out
	}
	vec := func(v any) []float32 {
		t.Helper()
		switch v := v.(type) {
		case []any:
			out := make([]float32, len(v))
			for i, x := range v {
				out[i] = float32(x.(float64))
			}
			return out
		case string:
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil || len(b)%4 != 0 {
				t.Fatalf("base64 embedding: %v (%d bytes)", err, len(b))
			}
			out := make([]float32, len(b)/4)
			for i := range out {
				out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			}
			return out
		}
		t.Fatalf("embedding of type %T", v)
		return nil
	}

	code, got := post(map[string]any{"model": "whatever", "input": []string{"the river market", "a report about energy"}}, e.openai)
	if code != 200 || got.Object != "list" || got.Model != "embed" || len(got.Data) != 2 {
		t.Fatalf("status %d, reply %+v: want 2 embeddings from model \"embed\"", code, got)
	}
	a, b := vec(got.Data[0].Embedding), vec(got.Data[1].Embedding)
	var norm, dot float64
	for i := range a {
		norm += float64(a[i]) * float64(a[i])
		dot += float64(a[i]) * float64(b[i])
	}
	t.Logf("%d dimensions, |a| %.4f, a·b %.4f", len(a), math.Sqrt(norm), dot)
	if len(a) != 64 || len(b) != 64 || math.Abs(norm-1) > 1e-3 || got.Data[1].Index != 1 || math.Abs(dot-1) < 1e-4 {
		t.Errorf("want two different normalised 64-d vectors, indexed in order")
	}

	code, got = post(map[string]any{"input": "the river market", "encoding_format": "base64"}, e.token)
	if code != 200 || len(got.Data) != 1 {
		t.Fatalf("one string, base64: status %d, %+v", code, got)
	}
	if c := vec(got.Data[0].Embedding); len(c) != len(a) || c[0] != a[0] || c[63] != a[63] {
		t.Errorf("the same text as base64 gave another vector")
	}

	for _, c := range []struct {
		name string
		body any
		want int
	}{
		{"no input", map[string]any{"model": "x"}, 400},
		{"empty list", map[string]any{"input": []string{}}, 400},
		{"empty text", map[string]any{"input": []string{"a", ""}}, 400},
		{"token ids", map[string]any{"input": []int{1, 2, 3}}, 400},
		{"dimensions", map[string]any{"input": "a", "dimensions": 8}, 400},
		{"bad encoding", map[string]any{"input": "a", "encoding_format": "int8"}, 400},
		{"too many", map[string]any{"input": make([]string, app.MaxEmbedInputs+1)}, 400},
	} {
		if code, _ := post(c.body, e.openai); code != c.want {
			t.Errorf("%s: status %d, want %d", c.name, code, c.want)
		}
	}
	if code, _ := post(map[string]any{"input": "a"}, "wrong"); code != 401 {
		t.Errorf("wrong key: status %d, want 401", code)
	}
	// No rerank model here: 404 in OpenAI's error shape, which a remote
	// reranker client takes as "unavailable".
	r := e.req(t, "POST", "/v1/rerank", map[string]any{"query": "q", "documents": []string{"a"}})
	if code := e.do(t, r, nil); code != 404 {
		t.Errorf("rerank without a rerank model: status %d, want 404", code)
	}
}

// TestRerankEndpoint: POST /v1/rerank answers as llama-server does, best
// first, cut to top_n, with scores that depend on the pair (the synthetic
// reranker is Qwen3-Reranker-shaped).
func TestRerankEndpoint(t *testing.T) {
	rr, _ := moreModels(t)
	e := newEnv(t, app.Config{RerankModel: rr}, server.Options{})
	type result struct {
		Index    int     `json:"index"`
		Score    float64 `json:"relevance_score"`
		Document *struct {
			Text string `json:"text"`
		} `json:"document"`
	}
	var out struct {
		Model   string   `json:"model"`
		Results []result `json:"results"`
	}
	docs := []any{"the river market opens at dawn", map[string]string{"text": "a report about energy"}, "music of the city", "the river market opens at dawn"}
	r := e.req(t, "POST", "/v1/rerank", map[string]any{"model": "any", "query": "where is the market", "documents": docs, "return_documents": true})
	r.Header.Set("Authorization", "Bearer "+e.openai)
	if code := e.do(t, r, &out); code != 200 {
		t.Fatalf("status %d", code)
	}
	t.Logf("model %s, results %+v", out.Model, out.Results)
	if out.Model != "rerank" || len(out.Results) != 4 {
		t.Fatalf("model %q, %d results: want 4 from \"rerank\"", out.Model, len(out.Results))
	}
	score := map[int]float64{}
	for i, res := range out.Results {
		if i > 0 && res.Score > out.Results[i-1].Score {
			t.Errorf("results not sorted best first: %+v", out.Results)
		}
		if res.Document == nil || res.Document.Text == "" {
			t.Errorf("result %d: no document text though return_documents", i)
		}
		score[res.Index] = res.Score
	}
	if len(score) != 4 || score[0] != score[3] || score[0] == score[1] || score[1] == score[2] {
		t.Errorf("scores by index %v: want every document once, equal pairs equal, different ones different", score)
	}

	r = e.req(t, "POST", "/v1/rerank", map[string]any{"query": "where is the market", "documents": docs[:3], "top_n": 1})
	out.Results = nil
	if code := e.do(t, r, &out); code != 200 || len(out.Results) != 1 || out.Results[0].Document != nil {
		t.Errorf("top_n 1: status %d, %+v: want the best one alone, without its text", code, out.Results)
	}
	for _, c := range []struct {
		name string
		body any
	}{
		{"no query", map[string]any{"documents": []string{"a"}}},
		{"no documents", map[string]any{"query": "q"}},
		{"number document", map[string]any{"query": "q", "documents": []any{1}}},
		{"negative top_n", map[string]any{"query": "q", "documents": []string{"a"}, "top_n": -1}},
	} {
		if code := e.do(t, e.req(t, "POST", "/v1/rerank", c.body), nil); code != 400 {
			t.Errorf("%s: status %d, want 400", c.name, code)
		}
	}
}

// askSources asks q and returns the sources (in prompt order, with their
// scores) and the trace.
func askSources(t *testing.T, a *app.App, q string) ([]app.Source, *app.Trace) {
	t.Helper()
	var srcs []app.Source
	tr, err := a.Ask(context.Background(), app.AskRequest{Question: q}, func(ev app.Event) error {
		if s, ok := ev.(app.Sources); ok {
			srcs = append(srcs, s...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return srcs, tr
}

// rerankApp opens an app over the fixtures' library with the tiny chat
// model answering in 4 tokens (these tests are about the passages), the
// reranker at rerankURL if set and the local one if local is set.
func rerankApp(t *testing.T, rerankURL, key string, local bool) *app.App {
	t.Helper()
	return rerankAppBudget(t, rerankURL, key, local, 0)
}

// rerankAppBudget is rerankApp with a rerank budget (0: none).
func rerankAppBudget(t *testing.T, rerankURL, key string, local bool, budgetMs int) *app.App {
	t.Helper()
	chat, embed, _ := fixtures(t)
	rr, _ := moreModels(t)
	cfg := app.Config{ChatModel: chat, EmbedModel: embed, RerankURL: rerankURL, RerankURLModel: "rerank", APIKey: key}
	if local {
		cfg.RerankModel = rr
	}
	// No rerank budget unless asked: rerank always runs. A fixed passage
	// budget: the automatic one follows the measured prefill speed, which
	// a loaded machine changes from one app to the next.
	return indexedApp(t, cfg, func(s *app.Settings) {
		s.Threads, s.MaxTokens, s.RerankBudgetMs, s.ContextTokens = 1, 4, budgetMs, 2048
	})
}

// reranked checks that srcs were reranked by the reference scores ref
// (passage text → score from a local rerank with the same model file):
// the sources come best first by rerank score, not in fusion order, and
// every passage ref also scored has the same score. Each app builds its
// own index (HNSW levels are random), so the candidates can differ a
// little between apps; a passage's score cannot.
func reranked(t *testing.T, srcs []app.Source, ref map[string]float64) {
	t.Helper()
	if len(srcs) < 3 {
		t.Fatalf("%d sources: too few to tell an order", len(srcs))
	}
	fusedOrder, shared := true, 0
	for i, s := range srcs {
		if i > 0 && s.Scores.Rerank > srcs[i-1].Scores.Rerank {
			t.Errorf("source %d scores %v after %v: not in rerank order", i, s.Scores.Rerank, srcs[i-1].Scores.Rerank)
		}
		if i > 0 && s.Scores.Fused > srcs[i-1].Scores.Fused {
			fusedOrder = false
		}
		if !(s.Scores.Rerank > 0 && s.Scores.Rerank < 1) {
			t.Errorf("source %d rerank score %v: want P(yes) in (0, 1)", i, s.Scores.Rerank)
		}
		if want, ok := ref[s.Text]; ok {
			shared++
			if s.Scores.Rerank != want {
				t.Errorf("source %d: rerank score %v, %v from the local reranker for the same passage", i, s.Scores.Rerank, want)
			}
		}
	}
	if fusedOrder {
		t.Errorf("sources still in fusion order: rerank changed nothing")
	}
	if ref != nil && shared < len(srcs)/2 {
		t.Errorf("only %d of %d sources among the reference's", shared, len(srcs))
	}
}

// TestRemoteRerankAgainstLore: an app whose rerank role is another
// Lore's /v1/rerank on loopback gets the scores a local rerank with the
// same model file gives (an order rerank changed), says the role leaves
// the machine, and when the remote fails (down, a Lore with no reranker
// answering 404, a wrong key) falls back to the local reranker, or skips
// rerank without one, recording the fallback in the trace.
func TestRemoteRerankAgainstLore(t *testing.T) {
	rr, _ := moreModels(t)
	e := newEnv(t, app.Config{RerankModel: rr}, server.Options{})
	const q = "what do the notes say about the river market"

	local, ltr := askSources(t, rerankApp(t, "", "", true), q)
	if ltr.FallbackReason != "" || ltr.RerankRoute != "" {
		t.Fatalf("local rerank: reason %q, rerank_route %q", ltr.FallbackReason, ltr.RerankRoute)
	}
	reranked(t, local, nil)
	ref := map[string]float64{}
	for _, s := range local {
		ref[s.Text] = s.Scores.Rerank
	}

	t.Run("remote reranks", func(t *testing.T) {
		a := rerankApp(t, e.base+"/v1", e.openai, true)
		sys := a.System()
		if sys.Local || len(sys.Remote) != 1 || sys.Remote[0].Role != "rerank" || sys.Remote[0].URL != e.base+"/v1" {
			t.Errorf("System local %v, remote %+v: want the rerank role reported as leaving the machine", sys.Local, sys.Remote)
		}
		srcs, tr := askSources(t, a, q)
		t.Logf("rerank_route %s, rerank %.1f ms, level %d %q", tr.RerankRoute, tr.Stages[app.StageRerank], tr.FallbackLevel, tr.FallbackReason)
		if !strings.HasPrefix(tr.RerankRoute, "remote:"+e.base) || strings.Contains(tr.FallbackReason, "rerank") || tr.Stages[app.StageRerank] <= 0 {
			t.Errorf("rerank_route %q, reason %q, rerank_ms %v: want the remote's rerank", tr.RerankRoute, tr.FallbackReason, tr.Stages[app.StageRerank])
		}
		reranked(t, srcs, ref)
		if !strings.Contains(tr.VersionID, "remote:"+e.base) {
			t.Errorf("version_id %q does not name the remote reranker", tr.VersionID)
		}
	})

	down := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return "http://" + ln.Addr().String() + "/v1"
	}()
	noReranker := newEnv(t, app.Config{}, server.Options{}) // a real server that answers 404
	for _, c := range []struct {
		name, url, key, cause string
	}{
		{"down", down, "", "connection refused"},
		{"no reranker there", noReranker.base + "/v1", noReranker.openai, "HTTP 404"},
		{"wrong key", e.base + "/v1", "not-the-key", "HTTP 401"},
	} {
		t.Run(c.name+", local reranks", func(t *testing.T) {
			srcs, tr := askSources(t, rerankApp(t, c.url, c.key, true), q)
			t.Logf("rerank_route %s, level %d, reason %q", tr.RerankRoute, tr.FallbackLevel, tr.FallbackReason)
			if tr.FallbackLevel != 1 || !strings.Contains(tr.FallbackReason, "remote rerank unavailable, the local reranker ran") ||
				!strings.Contains(tr.FallbackReason, c.cause) || !strings.Contains(tr.RerankRoute, "(fallback from remote:"+c.url) {
				t.Errorf("level %d, reason %q, rerank_route %q: want the local fallback recorded, caused by %q", tr.FallbackLevel, tr.FallbackReason, tr.RerankRoute, c.cause)
			}
			if strings.Contains(tr.FallbackReason, "not-the-key") {
				t.Errorf("the key is in the trace: %q", tr.FallbackReason)
			}
			reranked(t, srcs, ref)
		})
	}
	t.Run("failed, backed off: the next question goes straight to the local reranker", func(t *testing.T) {
		a := rerankApp(t, noReranker.base+"/v1", noReranker.openai, true)
		_, first := askSources(t, a, q)
		srcs, next := askSources(t, a, q)
		t.Logf("first: %q; next: %q", first.FallbackReason, next.FallbackReason)
		if !strings.Contains(first.FallbackReason, "HTTP 404") || strings.Contains(first.FallbackReason, "not tried") {
			t.Errorf("first question: reason %q, want the remote tried and its 404", first.FallbackReason)
		}
		if !strings.Contains(next.FallbackReason, "the local reranker ran") || !strings.Contains(next.FallbackReason, "not tried for") ||
			!strings.Contains(next.FallbackReason, "after 1 failure(s) in a row") || !strings.Contains(next.FallbackReason, "HTTP 404") {
			t.Errorf("next question: reason %q, want the remote backed off and the local reranker", next.FallbackReason)
		}
		reranked(t, srcs, ref)
	})
	t.Run("silent, with a budget: the fallback gets only what is left of it", func(t *testing.T) {
		// A listener that never answers (a fault a real server cannot be
		// made to show on demand); the remote's timeout is the 1 s budget,
		// so nothing is left for the local reranker.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		a := rerankAppBudget(t, "http://"+ln.Addr().String()+"/v1", "", true, 1000)
		_, first := askSources(t, a, q)
		_, next := askSources(t, a, q)
		t.Logf("first: %q, rerank %.0f ms; next: %q, rerank %.0f ms", first.FallbackReason, first.Stages[app.StageRerank],
			next.FallbackReason, next.Stages[app.StageRerank])
		if !strings.Contains(first.FallbackReason, "rerank skipped: remote rerank unavailable") ||
			!strings.Contains(first.FallbackReason, "nothing left of the 1000 ms budget") || !strings.HasPrefix(first.RerankRoute, "none (fallback from") {
			t.Errorf("first question: reason %q, rerank_route %q: want rerank skipped, the budget spent on the remote", first.FallbackReason, first.RerankRoute)
		}
		if !strings.Contains(next.FallbackReason, "the local reranker ran") || !strings.Contains(next.FallbackReason, "not tried for") ||
			!strings.Contains(next.RerankRoute, "(fallback from remote:") || strings.HasPrefix(next.RerankRoute, "none") {
			t.Errorf("next question: reason %q, rerank_route %q: want the local reranker, the remote backed off", next.FallbackReason, next.RerankRoute)
		}
	})
	t.Run("down, no local reranker", func(t *testing.T) {
		srcs, tr := askSources(t, rerankApp(t, down, "", false), q)
		t.Logf("rerank_route %s, level %d, reason %q", tr.RerankRoute, tr.FallbackLevel, tr.FallbackReason)
		if tr.FallbackLevel < 1 || !strings.Contains(tr.FallbackReason, "rerank skipped: remote rerank unavailable (no local rerank model") ||
			tr.RerankRoute != "none (fallback from remote:"+down+"#rerank)" {
			t.Errorf("level %d, reason %q, rerank_route %q: want rerank skipped and said so", tr.FallbackLevel, tr.FallbackReason, tr.RerankRoute)
		}
		for i, s := range srcs {
			if s.Scores.Rerank != 0 || i > 0 && s.Scores.Fused > srcs[i-1].Scores.Fused {
				t.Errorf("source %d: rerank score %v, fused %v: want fusion order, unreranked", i, s.Scores.Rerank, s.Scores.Fused)
			}
		}
	})
}

// TestRemoteRerankerClient: the client against lore serve directly: one
// score per document in the documents' order, a slow reply is
// ErrUnavailable after the budget, cancellation is the caller's.
func TestRemoteRerankerClient(t *testing.T) {
	rr, _ := moreModels(t)
	e := newEnv(t, app.Config{RerankModel: rr}, server.Options{})
	c, err := remote.NewReranker(remote.Options{URL: e.base + "/v1", Model: "rerank", APIKey: e.openai})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	docs := []string{"music of the city", "the river market opens at dawn", "a report about energy"}
	scores, err := c.Rerank(context.Background(), "where is the market", docs)
	if err != nil {
		t.Fatal(err)
	}
	_, direct, err := e.app.RerankTexts(context.Background(), "where is the market", docs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range docs {
		if scores[i] != direct[i] {
			t.Errorf("score %d: %v through HTTP, %v directly", i, scores[i], direct[i])
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Rerank(ctx, "q", docs); !errors.Is(err, context.Canceled) || errors.Is(err, remote.ErrUnavailable) {
		t.Errorf("cancelled: err %v, want context.Canceled, not unavailable", err)
	}
	// A server that accepts the connection and never answers (a fault a
	// real server cannot be made to show on demand: a bare listener).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	slow, _ := remote.NewReranker(remote.Options{URL: "http://" + ln.Addr().String() + "/v1", Model: "rerank", FirstToken: 300 * time.Millisecond, Retries: -1})
	// Only the timeout can end this call: the listener never answers.
	if _, err := slow.Rerank(context.Background(), "q", docs); !errors.Is(err, remote.ErrUnavailable) {
		t.Errorf("silent server: err %v, want unavailable once its 300 ms are up", err)
	}
}
