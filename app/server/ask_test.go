package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"lore/app"
	"lore/app/server"
	"lore/engine"
)

// traceStages must all be present in a finished trace (rerank_ms too, 0
// with its reason in skipped_stages: these tests have no rerank model).
var traceStages = []string{"queue_ms", "embed_ms", "vector_ms", "bm25_ms", "retrieval_ms", "rerank_ms",
	"prompt_assemble_ms", "prefill_ms", "llm_ttft_ms", "ttft_ms", "decode_ms", "total_ms"}

// TestAsk covers the streaming endpoint, the chat's prefix cache and the
// OpenAI-compatible endpoint on one app.
func TestAsk(t *testing.T) {
	e := newEnv(t, app.Config{}, server.Options{})
	const maxTokens = 48 // the tiny model decodes until the limit
	e.setMaxTokens(t, maxTokens)

	t.Run("stream", func(t *testing.T) {
		res := e.mustAsk(t, map[string]any{"question": "What does the library say about the river market?", "workspace": "default"})
		if ct := res.header.Get("Content-Type"); ct != "text/event-stream" {
			t.Errorf("Content-Type %q", ct)
		}
		if cc := res.header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("Cache-Control %q", cc)
		}
		checkOrder(t, res)
		tr := res.done
		checkTrace(t, tr)
		if tr.DecodeTokens < 20 {
			t.Fatalf("only %d tokens decoded (stop %q): too few to tell streaming from buffering", tr.DecodeTokens, tr.StopReason)
		}
		// Flushed at once: the first token reached the client while the
		// model was still decoding the rest, not with the final event.
		var doneAt time.Time
		for _, ev := range res.events {
			if ev.name == "done" {
				doneAt = ev.at
			}
		}
		gap := ms(doneAt.Sub(res.firstToken))
		if gap < 0.5*tr.Stages["decode_ms"] {
			t.Errorf("first token reached the client %.1f ms before the end, but decoding took %.1f ms: tokens are buffered",
				gap, tr.Stages["decode_ms"])
		}
		clientTTFT := ms(res.firstToken.Sub(res.sent))
		if clientTTFT < tr.Stages["ttft_ms"]-1 {
			t.Errorf("client TTFT %.1f ms below the server's %.1f ms", clientTTFT, tr.Stages["ttft_ms"])
		}
		if clientTTFT > tr.Stages["ttft_ms"]+1000 { // generous: two shared, busy cores
			t.Errorf("client TTFT %.1f ms is far above the server's ttft %.1f ms: the first token was held back", clientTTFT, tr.Stages["ttft_ms"])
		}
		t.Logf("client TTFT %.1f ms, server ttft %.1f ms, llm_ttft %.1f ms, decode %.1f ms for %d tokens; first token %.1f ms before done",
			clientTTFT, tr.Stages["ttft_ms"], tr.Stages["llm_ttft_ms"], tr.Stages["decode_ms"], tr.DecodeTokens, gap)

		// The stored trace is the streamed one.
		var stored app.Trace
		if code := e.do(t, e.req(t, "GET", "/api/traces/"+res.requestID, nil), &stored); code != 200 {
			t.Fatalf("GET /api/traces/%s: %d", res.requestID, code)
		}
		if stored.RequestID != tr.RequestID || stored.Stages["ttft_ms"] != tr.Stages["ttft_ms"] {
			t.Errorf("stored trace differs: %+v", stored)
		}
		if code := e.do(t, e.req(t, "GET", "/api/traces/nosuch", nil), nil); code != 404 {
			t.Errorf("unknown trace: %d, want 404", code)
		}
	})

	t.Run("chat reuses the cached prefix", func(t *testing.T) {
		prefix := systemPrefixTokens(t, e)
		first := e.mustAsk(t, map[string]any{"question": "Where is the garden?"})
		second := e.mustAsk(t, map[string]any{"question": "And what about the engine history?", "chat_id": first.chatID})
		if second.chatID != first.chatID || first.chatID == 0 {
			t.Fatalf("chat ids %d then %d", first.chatID, second.chatID)
		}
		for i, tr := range []*app.Trace{first.done, second.done} {
			if tr.CachedTokens < prefix {
				t.Errorf("question %d: cached_tokens %d < the system prefix's %d tokens", i+1, tr.CachedTokens, prefix)
			}
			if tr.CachedTokens > tr.PromptTokens || tr.EvalTokens != tr.PromptTokens-tr.CachedTokens {
				t.Errorf("question %d: prompt %d, cached %d, eval %d do not add up", i+1, tr.PromptTokens, tr.CachedTokens, tr.EvalTokens)
			}
			if tr.ChatID != first.chatID {
				t.Errorf("question %d: trace chat_id %d", i+1, tr.ChatID)
			}
		}
		// The prefill start event announced the same split.
		for _, ev := range second.events {
			var st app.StageEvent
			if ev.name == "stage" && json.Unmarshal(ev.data, &st) == nil && st.Name == "prefill" && st.State == "start" {
				if int(st.Detail["cached_tokens"].(float64)) != second.done.CachedTokens {
					t.Errorf("prefill start says %v cached, trace %d", st.Detail["cached_tokens"], second.done.CachedTokens)
				}
			}
		}
		var chat struct {
			Messages []struct{ Role, Content string } `json:"messages"`
		}
		if code := e.do(t, e.req(t, "GET", "/api/chats/"+strconv.FormatInt(first.chatID, 10), nil), &chat); code != 200 {
			t.Fatalf("GET chat: %d", code)
		}
		var roles []string
		for _, m := range chat.Messages {
			roles = append(roles, m.Role)
		}
		if strings.Join(roles, ",") != "user,assistant,user,assistant" {
			t.Errorf("chat messages %v", roles)
		}
		t.Logf("system prefix %d tokens; cached %d/%d then %d/%d", prefix,
			first.done.CachedTokens, first.done.PromptTokens, second.done.CachedTokens, second.done.PromptTokens)
	})

	t.Run("read-ahead status pushed", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		resp, err := e.client.Do(e.req(t, "GET", "/api/prefetch/events", nil).WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
			t.Fatalf("GET /api/prefetch/events: %d %q", resp.StatusCode, ct)
		}
		type pushed struct {
			st  app.PrefetchStatus
			err error
		}
		statuses := make(chan pushed)
		go readSSE(resp.Body, func(ev event) bool {
			var p pushed
			if ev.name != "status" {
				p.err = fmt.Errorf("event %q %s", ev.name, ev.data)
			} else {
				p.err = json.Unmarshal(ev.data, &p.st)
			}
			select {
			case statuses <- p:
				return p.err == nil
			case <-ctx.Done():
				return false
			}
		})
		next := func() app.PrefetchStatus {
			t.Helper()
			select {
			case p := <-statuses:
				if p.err != nil {
					t.Fatal(p.err)
				}
				return p.st
			case <-ctx.Done():
				t.Fatal("no status pushed")
				return app.PrefetchStatus{}
			}
		}
		if st := next(); st.State != app.ReadAheadNone {
			t.Fatalf("first status %+v, want none (the last question took what was read)", st)
		}
		const q = "When does the river market open on Saturdays?"
		var res app.PrefetchResult
		if code := e.do(t, e.req(t, "POST", "/api/prefetch", map[string]any{"draft": q, "workspace": "default"}), &res); code != 202 || !res.Started {
			t.Fatalf("POST /api/prefetch: %d %+v", code, res)
		}
		st := next()
		for st.State == app.ReadAheadReading {
			st = next()
		}
		if st.State != app.ReadAheadReady || st.Passages != res.Passages || st.Read != st.Passages {
			t.Fatalf("pushed once read: %+v, want ready with %d passages", st, res.Passages)
		}
		if ans := e.mustAsk(t, map[string]any{"question": q, "workspace": "default"}); ans.done.Prefetch != app.PrefetchHit {
			t.Errorf("question after the pushed ready: prefetch %q (%s)", ans.done.Prefetch, ans.done.PrefetchMiss)
		}
		if st := next(); st.State != app.ReadAheadNone {
			t.Errorf("pushed after the question took the drafts: %+v, want none", st)
		}
	})

	t.Run("openai", func(t *testing.T) { testOpenAI(t, e) })
}

// checkOrder asserts the event sequence trace → stage… → sources → token… → done.
func checkOrder(t *testing.T, res askResult) {
	t.Helper()
	idx := map[string][]int{}
	for i, ev := range res.events {
		idx[ev.name] = append(idx[ev.name], i)
	}
	last := len(res.events) - 1
	switch {
	case len(res.events) == 0:
		t.Fatal("no events")
	case res.events[0].name != "trace":
		t.Fatalf("first event %q, want trace", res.events[0].name)
	case res.events[last].name != "done" || len(idx["done"]) != 1:
		t.Fatalf("last event %q (%d done events), want one done last", res.events[last].name, len(idx["done"]))
	case len(idx["error"]) > 0:
		t.Fatalf("error event: %s", res.events[idx["error"][0]].data)
	case len(idx["sources"]) != 1:
		t.Fatalf("%d sources events", len(idx["sources"]))
	case len(idx["token"]) == 0:
		t.Fatal("no token events")
	case idx["sources"][0] > idx["token"][0]:
		t.Fatalf("sources (event %d) after the first token (event %d)", idx["sources"][0], idx["token"][0])
	}
	// Stages before the sources, in pipeline order, each started before done.
	var seq []string
	for _, i := range idx["stage"] {
		var st app.StageEvent
		if err := json.Unmarshal(res.events[i].data, &st); err != nil {
			t.Fatalf("stage event %s: %v", res.events[i].data, err)
		}
		if st.Ms < 0 {
			t.Errorf("stage %s %s: negative ms %v", st.Name, st.State, st.Ms)
		}
		seq = append(seq, st.Name+":"+st.State)
		switch {
		case st.Name == "retrieval" && st.State == "done":
			if n, ok := st.Detail["sources"].(float64); !ok || n < 1 {
				t.Errorf("retrieval done detail %v: want sources ≥ 1", st.Detail)
			}
		case st.Name == "prefill" && st.State == "start":
			for _, k := range []string{"prompt_tokens", "cached_tokens", "eval_tokens", "expected_ms"} {
				if _, ok := st.Detail[k]; !ok {
					t.Errorf("prefill start detail %v lacks %s", st.Detail, k)
				}
			}
			if i > idx["token"][0] {
				t.Errorf("prefill start (event %d) after the first token (event %d)", i, idx["token"][0])
			}
		}
		if st.Name != "queue" && st.Name != "prefill" && st.Name != "generate" && i > idx["sources"][0] {
			t.Errorf("stage %s:%s after the sources", st.Name, st.State)
		}
	}
	// The model's queue comes last before prefill: retrieval does not wait
	// for the question being answered before this one.
	want := []string{"retrieval:start", "retrieval:done", "prompt_assemble:start", "prompt_assemble:done", "queue:start", "queue:done", "prefill:start"}
	if !subsequence(want, seq) {
		t.Errorf("stage events %v do not contain %v in order", seq, want)
	}
	var sources []app.Source
	if err := json.Unmarshal(res.events[idx["sources"][0]].data, &sources); err != nil {
		t.Fatalf("sources: %v", err)
	}
	if len(sources) == 0 || len(sources) != res.done.ContextChunks {
		t.Errorf("%d sources, trace says %d context chunks", len(sources), res.done.ContextChunks)
	}
	for i, s := range sources {
		if s.N != i+1 || s.ChunkID == 0 || s.Document == "" || s.Path == "" || s.Text == "" {
			t.Errorf("source %d incomplete: %+v", i, s)
		}
	}
	// Every token arrived on its own event, with text.
	for _, i := range idx["token"] {
		var tok struct {
			Text *string `json:"text"`
		}
		if json.Unmarshal(res.events[i].data, &tok) != nil || tok.Text == nil || *tok.Text == "" {
			t.Fatalf("token event %s", res.events[i].data)
		}
	}
}

func subsequence(want, have []string) bool {
	i := 0
	for _, h := range have {
		if i < len(want) && h == want[i] {
			i++
		}
	}
	return i == len(want)
}

// checkTrace asserts a finished trace's stage times are complete and
// consistent.
func checkTrace(t *testing.T, tr *app.Trace) {
	t.Helper()
	const eps = 2.0 // ms: rounding and clock reads
	s := tr.Stages
	for _, name := range traceStages {
		v, ok := s[name]
		if !ok {
			t.Errorf("stage %s missing from %v", name, s)
			continue
		}
		if v < 0 || math.IsNaN(v) {
			t.Errorf("stage %s = %v", name, v)
		}
		if why, skipped := tr.Skipped[name]; skipped {
			if v != 0 || why == "" {
				t.Errorf("skipped stage %s = %v ms, reason %q: want 0 with the reason", name, v, why)
			}
			continue // it did not run: no start
		}
		start, ok := tr.StageStarts[name]
		if !ok || start < 0 {
			t.Errorf("stage %s start %v (present %v)", name, start, ok)
		}
		if name != "total_ms" && start+v > s["total_ms"]+eps {
			t.Errorf("stage %s runs %v+%v ms, past the total %v", name, start, v, s["total_ms"])
		}
	}
	for name, v := range s {
		if v < 0 {
			t.Errorf("stage %s negative: %v", name, v)
		}
	}
	if s["ttft_ms"] < s["llm_ttft_ms"] {
		t.Errorf("ttft_ms %v < llm_ttft_ms %v", s["ttft_ms"], s["llm_ttft_ms"])
	}
	// The stages before the first token happen one after another.
	before := s["queue_ms"] + s["retrieval_ms"] + s["rerank_ms"] + s["prompt_assemble_ms"] + s["llm_ttft_ms"]
	if before > s["ttft_ms"]+eps {
		t.Errorf("queue+retrieval+rerank+prompt_assemble+llm_ttft = %.2f ms > ttft %.2f ms", before, s["ttft_ms"])
	}
	if s["prefill_ms"] > s["llm_ttft_ms"]+eps {
		t.Errorf("prefill %v ms > llm_ttft %v ms", s["prefill_ms"], s["llm_ttft_ms"])
	}
	for _, part := range []string{"embed_ms", "vector_ms", "bm25_ms"} {
		if s[part] > s["retrieval_ms"]+eps {
			t.Errorf("%s %v > retrieval %v", part, s[part], s["retrieval_ms"])
		}
	}
	// Decode starts when the runner emits the first token, a little before
	// the server has flushed it (the end of ttft): the two overlap, so their
	// sum may exceed the total by that delivery time, but not by more.
	if over := s["ttft_ms"] + s["decode_ms"] - s["total_ms"]; over > s["flush_ms"]+s["runner_rtt_ms"]+20 {
		t.Errorf("ttft %v + decode %v exceeds total %v by %.1f ms", s["ttft_ms"], s["decode_ms"], s["total_ms"], over)
	}
	if s["total_ms"] < s["ttft_ms"] {
		t.Errorf("total %v < ttft %v", s["total_ms"], s["ttft_ms"])
	}
	if tr.FirstTokenAt.IsZero() {
		t.Error("first_token_at not set")
	} else if d := ms(tr.FirstTokenAt.Sub(tr.Received)); math.Abs(d-s["ttft_ms"]) > eps {
		t.Errorf("first_token_at is %.2f ms after received, ttft_ms %.2f", d, s["ttft_ms"])
	}
	if tr.PromptTokens == 0 || tr.ContextChunks == 0 || tr.RequestID == "" || tr.VersionID == "" || tr.Route == "" {
		t.Errorf("trace incomplete: prompt %d chunks %d id %q version %q route %q",
			tr.PromptTokens, tr.ContextChunks, tr.RequestID, tr.VersionID, tr.Route)
	}
	if tr.FallbackLevel != 1 { // no rerank model: level 1, nothing worse
		t.Errorf("fallback level %d (%s)", tr.FallbackLevel, tr.FallbackReason)
	}
}

// systemPrefixTokens counts the tokens of the chat model's system prefix:
// the system prompt is read from the app's source (it is unexported) and
// tokenised by a runner of the same model, as the app's warm-up does.
func systemPrefixTokens(t *testing.T, e *env) int {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "../prompt.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	system := ""
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && vs.Names[0].Name == "systemPrompt" {
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok {
				system = constant.StringVal(constant.MakeFromLiteral(lit.Value, lit.Kind, 0))
			}
		}
		return true
	})
	if system == "" {
		t.Fatal("systemPrompt constant not found in ../prompt.go")
	}
	chat, _, _ := fixtures(t)
	m, err := engine.Open(engine.Options{Path: chat, NumCtx: 512, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prefix, err := m.Template().Prefix(system)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := m.Tokenize(context.Background(), prefix, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) < 16 {
		t.Fatalf("system prefix is only %d tokens", len(toks))
	}
	return len(toks)
}

func testOpenAI(t *testing.T, e *env) {
	e.setMaxTokens(t, 32)
	msgs := []map[string]string{{"role": "system", "content": "be brief"}, {"role": "user", "content": "What is in the river notes?"}}

	t.Run("not streaming", func(t *testing.T) {
		// Extra fields ordinary clients send must not be refused.
		body := map[string]any{"model": "lore", "messages": msgs, "temperature": 0.2, "max_tokens": 16, "stream": false,
			"n": 1, "presence_penalty": 0, "stream_options": nil}
		var out struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Model   string `json:"model"`
			Choices []struct {
				Index        int    `json:"index"`
				FinishReason string `json:"finish_reason"`
				Message      struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if code := e.do(t, e.req(t, "POST", "/v1/chat/completions", body), &out); code != 200 {
			t.Fatalf("status %d", code)
		}
		if out.Object != "chat.completion" || !strings.HasPrefix(out.ID, "chatcmpl-") || out.Model != "lore" ||
			len(out.Choices) != 1 || out.Choices[0].Message.Role != "assistant" ||
			strings.TrimSpace(out.Choices[0].Message.Content) == "" || out.Choices[0].FinishReason == "" {
			t.Fatalf("reply %+v", out)
		}
	})

	t.Run("streaming", func(t *testing.T) {
		r := e.req(t, "POST", "/v1/chat/completions", map[string]any{"model": "lore:default", "messages": msgs, "stream": true})
		resp, err := e.client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("status %d, %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		var content strings.Builder
		var lines []string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if l := sc.Text(); l != "" {
				lines = append(lines, l)
			}
		}
		if len(lines) < 3 || lines[len(lines)-1] != "data: [DONE]" {
			t.Fatalf("stream does not end with [DONE]: %q", lines)
		}
		finish := ""
		for i, l := range lines[:len(lines)-1] {
			data, ok := strings.CutPrefix(l, "data: ")
			if !ok {
				t.Fatalf("line %d: %q", i, l)
			}
			var ch struct {
				Object  string `json:"object"`
				Model   string `json:"model"`
				Choices []struct {
					Delta        map[string]string `json:"delta"`
					FinishReason *string           `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(data), &ch); err != nil || ch.Object != "chat.completion.chunk" || len(ch.Choices) != 1 || ch.Model != "lore:default" {
				t.Fatalf("chunk %q: %v", data, err)
			}
			content.WriteString(ch.Choices[0].Delta["content"])
			if ch.Choices[0].FinishReason != nil {
				if i != len(lines)-2 {
					t.Errorf("finish_reason on chunk %d of %d", i, len(lines)-1)
				}
				finish = *ch.Choices[0].FinishReason
			}
		}
		if strings.TrimSpace(content.String()) == "" || finish == "" {
			t.Fatalf("content %q, finish %q", content.String(), finish)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, c := range []struct {
			name string
			body any
			want int
		}{
			{"no user message", map[string]any{"model": "lore", "messages": []map[string]string{{"role": "system", "content": "x"}}}, 400},
			{"not json", "{", 400},
		} {
			if code := e.do(t, e.req(t, "POST", "/v1/chat/completions", c.body), nil); code != c.want {
				t.Errorf("%s: %d, want %d", c.name, code, c.want)
			}
		}
		var models struct {
			Data []struct{ ID string } `json:"data"`
		}
		if code := e.do(t, e.req(t, "GET", "/v1/models", nil), &models); code != 200 || len(models.Data) < 2 ||
			models.Data[0].ID != "lore" {
			t.Errorf("/v1/models: %d %+v", code, models)
		}
	})
}

// TestBackpressure: overload, client disconnect and explicit cancel, then
// goroutines and file descriptors are back near where they started.
func TestBackpressure(t *testing.T) {
	e := newEnv(t, app.Config{QueueCapacity: 2}, server.Options{})
	e.setMaxTokens(t, 16)
	e.mustAsk(t, map[string]any{"question": "warm up the pools"})
	check := leakCheck(t, e)

	t.Run("overload", func(t *testing.T) {
		const n = 12
		type outcome struct {
			res askResult
			err error
			end time.Time // when the reply (or the stream) ended
		}
		out := make([]outcome, n)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				res, err := e.ask(ctx, t, map[string]any{"question": "river garden question " + strconv.Itoa(i)})
				out[i] = outcome{res, err, time.Now()}
			})
		}
		close(start)
		wg.Wait()
		if ctx.Err() != nil {
			t.Fatal("asks still running after 60 s: something hangs")
		}
		accepted, refused := 0, 0
		var lastAnswer, lastRefusal time.Time // when the last accepted answer and the last refusal ended
		for _, o := range out {
			if o.err == nil && o.res.status == 200 && o.end.After(lastAnswer) {
				lastAnswer = o.end
			}
		}
		for i, o := range out {
			if o.err != nil {
				t.Errorf("ask %d: %v", i, o.err)
				continue
			}
			switch o.res.status {
			case 200:
				accepted++
				if o.res.done == nil {
					t.Errorf("ask %d: accepted but no done event; events: %v", i, names(o.res.events))
				}
				var traceAt, admittedAt time.Time
				for _, ev := range o.res.events {
					var st app.StageEvent
					switch {
					case ev.name == "error":
						t.Errorf("ask %d: accepted stream carried an error: %s", i, ev.data)
					case ev.name == "trace":
						traceAt = ev.at
					case ev.name == "stage" && json.Unmarshal(ev.data, &st) == nil && st.Name == "queue" && st.State == "done":
						admittedAt = ev.at
					}
				}
				// A request that waits in the queue still learns its id
				// early: its trace event is not held back until admission.
				// Relative, not absolute: a busy machine stretches both
				// the wait and the delivery.
				if q := o.res.done; q != nil && q.Stages["queue_ms"] > 1000 {
					if gap := ms(admittedAt.Sub(traceAt)); gap < q.Stages["queue_ms"]/4 {
						t.Errorf("ask %d waited %.0f ms in the queue but got its trace event only %.0f ms before admission",
							i, q.Stages["queue_ms"], gap)
					}
				}
			case 429:
				refused++
				if o.end.After(lastRefusal) {
					lastRefusal = o.end
				}
				if ra, err := strconv.Atoi(o.res.header.Get("Retry-After")); err != nil || ra < 1 {
					t.Errorf("ask %d: 429 with Retry-After %q", i, o.res.header.Get("Retry-After"))
				}
				var eb struct{ Error string }
				if json.Unmarshal(o.res.body, &eb) != nil || eb.Error == "" {
					t.Errorf("ask %d: 429 body %q", i, o.res.body)
				}

			default:
				t.Errorf("ask %d: status %d, body %q", i, o.res.status, o.res.body)
			}
		}
		t.Logf("%d accepted, %d refused (last refusal %v before the last answer ended)", accepted, refused, lastAnswer.Sub(lastRefusal))
		if refused == 0 || accepted < 3 {
			t.Errorf("%d accepted, %d refused: want ≥ 3 accepted (one running, two queued) and the rest refused", accepted, refused)
		}
		// A refusal is immediate, not a place in a line: every one came
		// back while accepted answers were still streaming.
		if refused > 0 && !lastRefusal.Before(lastAnswer) {
			t.Errorf("the last refusal came %v after the last accepted answer ended: refusals waited for the queue", lastRefusal.Sub(lastAnswer))
		}
		// Once the burst is over the server answers again.
		e.mustAsk(t, map[string]any{"question": "after the burst"})
	})

	t.Run("client disconnect cancels generation", func(t *testing.T) {
		e.setMaxTokens(t, 2000)
		defer e.setMaxTokens(t, 16)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := e.req(t, "POST", "/api/ask", map[string]any{"question": "tell me everything about the library"}).WithContext(ctx)
		resp, err := e.client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		id, tokens := "", 0
		readSSE(resp.Body, func(ev event) bool {
			if ev.name == "trace" {
				var v struct {
					RequestID string `json:"request_id"`
				}
				json.Unmarshal(ev.data, &v)
				id = v.RequestID
			}
			if ev.name == "token" {
				tokens++
			}
			return tokens < 5
		})
		cancel() // the client goes away mid-answer
		resp.Body.Close()
		gone := time.Now()
		if id == "" || tokens < 5 {
			t.Fatalf("request %q, %d tokens before disconnecting", id, tokens)
		}
		tr := waitTrace(t, e, id)
		t.Logf("stored %v after the disconnect: stop %q, error %q, decode_tokens %d, total %.1f ms",
			time.Since(gone).Round(time.Millisecond), tr.StopReason, tr.Error, tr.DecodeTokens, tr.Stages["total_ms"])
		if tr.StopReason != "cancel" && tr.Error == "" {
			t.Errorf("trace stop_reason %q, no error: the generation was not cancelled", tr.StopReason)
		}
		if tr.DecodeTokens > 1000 || tr.StopReason == "length" {
			t.Errorf("decoded %d of 2000 tokens (stop %q): the generation ran on", tr.DecodeTokens, tr.StopReason)
		}
		// The engine is free at once: the next question does not queue
		// behind the abandoned one. Measured against the abandoned
		// generation's own speed, so a slow machine does not fail it:
		// running on would have cost the rest of its 2000 tokens.
		e.setMaxTokens(t, 16)
		next := e.mustAsk(t, map[string]any{"question": "next question"})
		if rate := tr.DecodeTokS; rate > 0 {
			restMs := float64(2000-tr.DecodeTokens) / rate * 1000
			if q := next.done.Stages["queue_ms"]; q > restMs/2 {
				t.Errorf("next question waited %.1f ms in the queue, as long as the cancelled answer would have run on (%.0f ms)", q, restMs)
			}
		}
	})

	t.Run("cancel endpoint", func(t *testing.T) {
		e.setMaxTokens(t, 2000)
		defer e.setMaxTokens(t, 16)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r := e.req(t, "POST", "/api/ask", map[string]any{"question": "a long answer please"}).WithContext(ctx)
		resp, err := e.client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		id, tokens := "", 0
		var cancelled time.Time
		var done *app.Trace
		err = readSSE(resp.Body, func(ev event) bool {
			switch ev.name {
			case "trace":
				var v struct {
					RequestID string `json:"request_id"`
				}
				json.Unmarshal(ev.data, &v)
				id = v.RequestID
			case "token":
				tokens++
				if tokens == 5 {
					var ok map[string]bool
					if code := e.do(t, e.req(t, "POST", "/api/ask/"+id+"/cancel", nil), &ok); code != 200 || !ok["cancelled"] {
						t.Errorf("cancel: %d %v", code, ok)
					}
					cancelled = time.Now()
				}
			case "done":
				done = new(app.Trace)
				json.Unmarshal(ev.data, done)
			}
			return true
		})
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if cancelled.IsZero() || done == nil {
			t.Fatalf("cancelled %v, done %v", cancelled, done)
		}
		// Event-based, not a wall-clock bound: the answer stopped as
		// cancelled, far short of its 2000 tokens.
		t.Logf("stream ended %v after the cancel", time.Since(cancelled).Round(time.Millisecond))
		if done.StopReason != "cancel" || done.DecodeTokens > 1000 {
			t.Errorf("done trace: stop %q, %d tokens decoded", done.StopReason, done.DecodeTokens)
		}
		if code := e.do(t, e.req(t, "POST", "/api/ask/"+id+"/cancel", nil), nil); code != 404 {
			t.Errorf("cancel after the end: %d, want 404", code)
		}
	})

	check()
}

func waitTrace(t *testing.T, e *env, id string) *app.Trace {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // polling; a busy machine stores late
	for {
		var tr app.Trace
		code := e.do(t, e.req(t, "GET", "/api/traces/"+id, nil), &tr)
		if code == 200 {
			return &tr
		}
		if code != 404 || time.Now().After(deadline) {
			t.Fatalf("GET /api/traces/%s: %d", id, code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func names(evs []event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.name
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
