package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"lore/app"
	"lore/app/remote"
	"lore/app/server"
	"lore/engine"
)

// TestRemoteChatAgainstLore points the remote chat client at a real lore
// serve's /v1/chat/completions on loopback (the tiny synthetic model
// answering): the answer streams, TTFT is measured, counts the server
// does not report stay unknown, a wrong key is refused without retries,
// and cancelling mid-answer stops the server's generation.
func TestRemoteChatAgainstLore(t *testing.T) {
	e := newEnv(t, app.Config{}, server.Options{})
	newChat := func(key string) *remote.Chat {
		c, err := remote.NewChat(remote.Options{URL: e.base + "/v1", Model: "lore", APIKey: key, FirstToken: 60 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c := newChat(e.openai)
	// The prompt as Lore's pipeline renders it; Generate sends it as
	// messages, the question last (which lore serve answers).
	prompt, err := c.Template().Render([]engine.Message{{Role: "system", Content: "Answer from the passages."},
		{Role: "user", Content: "what does the library say about the river market"}})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("streams", func(t *testing.T) {
		e.setMaxTokens(t, 24)
		var pieces []string
		start := time.Now()
		st, err := c.Generate(context.Background(), engine.GenerateRequest{Prompt: prompt}, func(s string) error {
			pieces = append(pieces, s)
			return nil
		})
		wall := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d pieces, ttft %.1f ms, headers %.1f ms, wall %v, stop %q, decode %d tokens at %.0f tok/s",
			len(pieces), st.ClientTTFT, st.RunnerRTTMs, wall.Round(time.Millisecond), st.StopReason, st.DecodeTokens, st.DecodeTokS)
		if len(pieces) < 2 || strings.TrimSpace(strings.Join(pieces, "")) == "" {
			t.Fatalf("answer %q: want a streamed answer", pieces)
		}
		if st.ClientTTFT <= 0 || st.ClientTTFT > ms(wall) || st.RunnerRTTMs <= 0 || st.RunnerRTTMs > st.ClientTTFT {
			t.Errorf("ttft %.1f ms, headers %.1f ms, wall %v: want 0 < headers <= ttft <= wall", st.ClientTTFT, st.RunnerRTTMs, wall)
		}
		// lore serve's /v1 reports no usage: unknown, not zero.
		if st.PromptTokens != remote.Unknown || st.CachedTokens != remote.Unknown || st.EvalTokens != remote.Unknown {
			t.Errorf("prompt/cached/eval %d/%d/%d: want unknown (%d)", st.PromptTokens, st.CachedTokens, st.EvalTokens, remote.Unknown)
		}
		if st.StopReason != "stop" || st.DecodeTokens != len(pieces) {
			t.Errorf("stop %q, decode tokens %d for %d pieces", st.StopReason, st.DecodeTokens, len(pieces))
		}
	})

	t.Run("wrong key", func(t *testing.T) {
		_, err := newChat("not-the-key").Generate(context.Background(), engine.GenerateRequest{Prompt: prompt}, func(string) error { return nil })
		var se *remote.StatusError
		if !errors.As(err, &se) || se.Code != 401 || errors.Is(err, remote.ErrUnavailable) {
			t.Fatalf("err %v: want a 401 that is no reason to fall back", err)
		}
		if strings.Contains(err.Error(), "not-the-key") {
			t.Errorf("the key is in the error: %v", err)
		}
	})

	t.Run("cancel stops the server", func(t *testing.T) {
		e.setMaxTokens(t, 2000)
		defer e.setMaxTokens(t, 16)
		const q = "tell me everything the notes say about energy"
		long, _ := c.Template().Render([]engine.Message{{Role: "user", Content: q}})
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		st, err := c.Generate(ctx, engine.GenerateRequest{Prompt: long}, func(string) error {
			if n++; n == 5 {
				cancel()
			}
			return nil
		})
		cancelled := time.Now()
		if !errors.Is(err, context.Canceled) || st.StopReason != "cancel" {
			t.Fatalf("err %v, stop %q: want cancelled", err, st.StopReason)
		}
		tr := waitTraceOf(t, e, q)
		t.Logf("server trace stored %v after the cancel: stop %q, error %q, decoded %d tokens",
			time.Since(cancelled).Round(time.Millisecond), tr.StopReason, tr.Error, tr.DecodeTokens)
		if tr.StopReason != "cancel" && tr.Error == "" || tr.DecodeTokens > 1000 {
			t.Errorf("server stop %q, %d of 2000 tokens: the generation ran on", tr.StopReason, tr.DecodeTokens)
		}
	})
}

// waitTraceOf waits for the stored trace of question q.
func waitTraceOf(t *testing.T, e *env, q string) *app.Trace {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		raws, err := e.app.Traces(context.Background(), 20)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range raws {
			var tr app.Trace
			if json.Unmarshal(raw, &tr) == nil && tr.Question == q {
				return &tr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no trace of %q after 30 s", q)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// remoteApp opens a second app whose chat role is the server at chatURL,
// with the tiny local chat model as its fallback when local is set, and
// indexes the same library.
func remoteApp(t *testing.T, chatURL, key string, local bool) *app.App {
	t.Helper()
	chat, embed, _ := fixtures(t)
	cfg := app.Config{EmbedModel: embed, ChatURL: chatURL, ChatURLModel: "lore", APIKey: key}
	if local {
		cfg.ChatModel = chat
	}
	return indexedApp(t, cfg, func(s *app.Settings) { s.Threads, s.MaxTokens = 1, 16 })
}

// indexedApp opens an app of cfg in a fresh data folder with tune applied
// to its settings, and indexes the fixtures' library.
func indexedApp(t *testing.T, cfg app.Config, tune func(*app.Settings)) *app.App {
	t.Helper()
	_, _, lib := fixtures(t)
	cfg.DataDir, cfg.WorkerCmd = t.TempDir(), []string{os.Args[0], "parse-worker"}
	ctx := context.Background()
	open := func() *app.App {
		a, err := app.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	a := open()
	s := a.Settings()
	tune(&s)
	if err := a.SaveSettings(ctx, s); err != nil {
		t.Fatal(err)
	}
	// Remote roles take their settings (timeouts from the rerank budget,
	// say) at the start: a second start has them.
	a.Close()
	a = open()
	if _, err := a.Index(ctx, "default", []string{lib}, nil); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestAskThroughRemoteLore: a Lore whose chat role is another Lore's
// /v1 on loopback answers with a complete trace naming the remote, says
// that questions leave the machine, and falls back to its local model (or
// fails plainly without one) when the remote is down.
func TestAskThroughRemoteLore(t *testing.T) {
	e := newEnv(t, app.Config{}, server.Options{})
	e.setMaxTokens(t, 16)
	ask := func(a *app.App, q string) (string, *app.Trace, error) {
		var b strings.Builder
		tr, err := a.Ask(context.Background(), app.AskRequest{Question: q}, func(ev app.Event) error {
			if tok, ok := ev.(app.Token); ok {
				b.WriteString(tok.Text)
			}
			return nil
		})
		return b.String(), tr, err
	}

	t.Run("remote answers", func(t *testing.T) {
		a := remoteApp(t, e.base+"/v1", e.openai, true)
		sys := a.System()
		if sys.Local || len(sys.Remote) != 1 || sys.Remote[0].Role != "chat" || sys.Remote[0].URL != e.base+"/v1" {
			t.Errorf("System local %v, remote %+v: want the chat role reported as leaving the machine", sys.Local, sys.Remote)
		}
		answer, tr, err := ask(a, "what do the notes say about the river market")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("route %s, ttft %.1f ms, llm_ttft %.1f ms, runner_rtt %.1f ms, total %.1f ms, answer %q",
			tr.Route, tr.Stages[app.StageTTFT], tr.Stages[app.StageLLMTTFT], tr.Stages[app.StageRunnerRTT], tr.Stages[app.StageTotal], answer)
		if strings.TrimSpace(answer) == "" || !strings.HasPrefix(tr.Route, "remote:"+e.base) || tr.FallbackReason != "" && strings.Contains(tr.FallbackReason, "remote") {
			t.Errorf("answer %q, route %q, fallback %q: want the remote's answer", answer, tr.Route, tr.FallbackReason)
		}
		if tr.PromptTokens != remote.Unknown || tr.CachedTokens != remote.Unknown {
			t.Errorf("prompt/cached tokens %d/%d: lore serve reports none, want unknown", tr.PromptTokens, tr.CachedTokens)
		}
		if tr.Stages[app.StageLLMTTFT] <= 0 || tr.Stages[app.StageLLMTTFT] > tr.Stages[app.StageTotal] {
			t.Errorf("llm_ttft %.1f ms of total %.1f ms", tr.Stages[app.StageLLMTTFT], tr.Stages[app.StageTotal])
		}
	})

	down := func() string { // a loopback port nothing listens on
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return "http://" + ln.Addr().String() + "/v1"
	}()
	t.Run("remote down, local answers", func(t *testing.T) {
		a := remoteApp(t, down, "", true)
		answer, tr, err := ask(a, "what do the notes say about the river market")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("route %s, level %d, reason %q", tr.Route, tr.FallbackLevel, tr.FallbackReason)
		if strings.TrimSpace(answer) == "" || !strings.Contains(tr.Route, "fallback from remote:") ||
			tr.FallbackLevel < 1 || !strings.Contains(tr.FallbackReason, "remote chat unavailable") {
			t.Errorf("answer %q, route %q, level %d, reason %q: want the local fallback recorded", answer, tr.Route, tr.FallbackLevel, tr.FallbackReason)
		}
	})
	t.Run("remote down, no local model", func(t *testing.T) {
		a := remoteApp(t, down, "", false)
		_, _, err := ask(a, "what do the notes say about the river market")
		if !errors.Is(err, remote.ErrUnavailable) || !strings.Contains(err.Error(), "no local chat model") {
			t.Fatalf("err %v: want a plain remote-unavailable error", err)
		}
	})
}

// TestRemoteEmbeddingsHeldToTheIndex: an app embedding through another
// Lore's /v1/embeddings on loopback stores its vectors under the remote
// model's id; reopened against a server whose model has the same name but
// another dimension, or asking for another model than the server runs, it
// refuses the vectors (the question falls back to BM25, saying why)
// instead of mixing them in. All three servers are real: lore serve with
// the 64-d embed.gguf, with a 128-d embed.gguf, and the first again.
func TestRemoteEmbeddingsHeldToTheIndex(t *testing.T) {
	_, _, lib := fixtures(t)
	_, wide := moreModels(t)
	narrow := newEnv(t, app.Config{}, server.Options{})
	wider := newEnv(t, app.Config{EmbedModel: wide}, server.Options{})
	data := t.TempDir()
	open := func(e *env, model string) *app.App {
		a, err := app.New(context.Background(), app.Config{DataDir: data, EmbedURL: e.base + "/v1", EmbedURLModel: model, APIKey: e.openai,
			WorkerCmd: []string{os.Args[0], "parse-worker"}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := open(narrow, "embed")
	if sys := a.System(); sys.Local || len(sys.Remote) != 1 || sys.Remote[0].Role != "embedding" {
		t.Errorf("System local %v, remote %+v: want the embedding role reported", sys.Local, sys.Remote)
	}
	if _, err := a.Index(context.Background(), "default", []string{lib}, nil); err != nil {
		t.Fatal(err)
	}
	_, tr := mustAskApp(t, a, "river market")
	if tr.RetrievalMode == "bm25" {
		t.Fatalf("retrieval %q (%s): want the remote vectors used", tr.RetrievalMode, tr.FallbackReason)
	}
	a.Close()

	for _, c := range []struct {
		name   string
		server *env
		model  string
		reason string
	}{
		{"same name, another dimension", wider, "embed", "128-dimensional vectors, the index holds 64"},
		{"another model than the server runs", narrow, "other-model", `server embedded with "embed", the index uses "other-model"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := open(c.server, c.model)
			defer a.Close()
			// Indexing embeds the passages again for a new model id: the
			// server's reply is refused there too, nothing stored.
			sum, err := a.Index(context.Background(), "default", []string{lib}, nil)
			t.Logf("index: embedded %d, errors %+v, err %v", sum.Embedded, sum.Errors, err)
			if sum.Embedded != 0 {
				t.Errorf("%d passages embedded with the refused vectors", sum.Embedded)
			}
			_, tr := mustAskApp(t, a, "river market")
			t.Logf("retrieval %s, reason %q", tr.RetrievalMode, tr.FallbackReason)
			said := tr.FallbackReason
			if err != nil {
				said += "; " + err.Error()
			}
			if tr.RetrievalMode != "bm25" || !strings.Contains(said, c.reason) || !errors.Is(err, remote.ErrMismatch) && err != nil {
				t.Errorf("retrieval %q, said %q: want the vectors refused: %s", tr.RetrievalMode, said, c.reason)
			}
		})
	}
}

func mustAskApp(t *testing.T, a *app.App, q string) (string, *app.Trace) {
	t.Helper()
	var b strings.Builder
	tr, err := a.Ask(context.Background(), app.AskRequest{Question: q}, func(ev app.Event) error {
		if tok, ok := ev.(app.Token); ok {
			b.WriteString(tok.Text)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String(), tr
}
