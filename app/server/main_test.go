package server_test

// Shared fixtures for the server tests: the test binary doubles as the
// parse worker, models run in the lore-runner programs `make test` builds
// (LORE_RUNNER_DIR), tiny synthetic models
// are written once per run, and each test gets its own data folder, app and
// real HTTP server on 127.0.0.1:0.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"lore/app"
	"lore/app/server"
	"lore/engine/synth"
	"lore/index/parse"
)

func TestMain(m *testing.M) {
	parse.MaybeServeWorker(os.Args) // a parse worker child process serves and exits here
	code := m.Run()
	if fixDir != "" {
		os.RemoveAll(fixDir)
	}
	os.Exit(code)
}

var (
	fixOnce sync.Once
	fixDir  string
	fixErr  error
)

// fixtures writes the tiny chat and embedding models and a small generated
// library once per run.
func fixtures(t testing.TB) (chat, embed, library string) {
	t.Helper()
	fixOnce.Do(func() {
		if fixDir, fixErr = os.MkdirTemp("", "lore-server-test"); fixErr != nil {
			return
		}
		if fixErr = synth.Write(filepath.Join(fixDir, "chat.gguf"), synth.Options{Shape: "tiny", Seed: 1}); fixErr != nil {
			return
		}
		if fixErr = synth.Write(filepath.Join(fixDir, "embed.gguf"), synth.Options{Shape: "tiny", Embedding: true, Seed: 2}); fixErr != nil {
			return
		}
		fixErr = writeLibrary(filepath.Join(fixDir, "library"), 8)
	})
	if fixErr != nil {
		t.Fatal(fixErr)
	}
	return filepath.Join(fixDir, "chat.gguf"), filepath.Join(fixDir, "embed.gguf"), filepath.Join(fixDir, "library")
}

var libWords = strings.Fields(`river market library garden energy history science music story city house water
light power memory engine paper window student report question answer model system world people state
the a of and to in is it that for on with as was at by be this from or have an they which one were`)

// writeLibrary writes n small Markdown notes with headings.
func writeLibrary(dir string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(42, 7))
	para := func(words int) string {
		w := make([]string, words)
		for i := range w {
			w[i] = libWords[rng.IntN(len(libWords))]
		}
		return strings.Join(w, " ") + ".\n\n"
	}
	for i := range n {
		var b strings.Builder
		fmt.Fprintf(&b, "# Note %d about the %s\n\n", i, libWords[i%12])
		for s := range 3 {
			fmt.Fprintf(&b, "## Part %d\n\n%s%s", s, para(60), para(40))
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("note-%02d.md", i)), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// env is one app behind one real server, with a client.
type env struct {
	app    *app.App
	ln     net.Listener
	port   int
	base   string // http://127.0.0.1:PORT
	token  string // full access
	openai string // the /v1-only key
	tr     *http.Transport
	client *http.Client
}

// newEnv opens an app on a fresh data folder with the tiny models (a
// cfg.ChatModel of its own kept), indexes the generated library, waits for
// the warm system prefix and serves it with both tokens.
func newEnv(t *testing.T, cfg app.Config, opt server.Options) *env {
	t.Helper()
	chat, embed, lib := fixtures(t)
	ctx := context.Background()
	cfg.DataDir = t.TempDir()
	if cfg.ChatModel == "" {
		cfg.ChatModel = chat
	}
	if cfg.EmbedModel == "" {
		cfg.EmbedModel = embed
	}
	cfg.WorkerCmd = []string{os.Args[0], "parse-worker"}
	a, err := app.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() }) // runs last: after the server is down
	set := a.Settings()
	set.Threads = 1 // two shared cores: leave one for the test and the server
	if err := a.SaveSettings(ctx, set); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Index(ctx, "default", []string{lib}, nil); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := a.WaitWarm(wctx); err != nil {
		t.Fatal("warm:", err)
	}
	token, err := server.RotateToken(cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	if opt.OpenAIToken == "" {
		if opt.OpenAIToken, err = server.LoadOpenAIToken(cfg.DataDir); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := server.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(a, token, ln, opt)
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	e := &env{app: a, ln: ln, port: ln.Addr().(*net.TCPAddr).Port, token: token, openai: opt.OpenAIToken}
	e.base = fmt.Sprintf("http://127.0.0.1:%d", e.port)
	e.tr = &http.Transport{MaxConnsPerHost: 64, MaxIdleConnsPerHost: 64, DisableCompression: true}
	e.client = &http.Client{Transport: e.tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	t.Cleanup(func() {
		e.tr.CloseIdleConnections()
		stop()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return 10 s after its context ended")
		}
	})
	return e
}

// req builds a request to the server with the token.
func (e *env) req(t testing.TB, method, path string, body any) *http.Request {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	r, err := http.NewRequest(method, e.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+e.token)
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	return r
}

// do sends a request and decodes a JSON reply into out (if not nil),
// returning the status.
func (e *env) do(t testing.TB, r *http.Request, out any) int {
	t.Helper()
	resp, err := e.client.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", r.Method, r.URL.Path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", r.Method, r.URL.Path, b, err)
		}
	}
	return resp.StatusCode
}

// setMaxTokens changes max_tokens through the API (a partial PUT keeps the
// other settings).
func (e *env) setMaxTokens(t testing.TB, n int) {
	t.Helper()
	var got app.Settings
	if code := e.do(t, e.req(t, "PUT", "/api/settings", map[string]int{"max_tokens": n}), &got); code != 200 || got.MaxTokens != n {
		t.Fatalf("PUT /api/settings max_tokens=%d: status %d, got %+v", n, code, got)
	}
}

// event is one server-sent event with the time the client read it.
type event struct {
	name string
	data json.RawMessage
	at   time.Time
}

// readSSE reads events until the stream ends or fn returns false.
func readSSE(r io.Reader, fn func(event) bool) error {
	br := bufio.NewReader(r)
	var ev event
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" {
				return nil
			}
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if ev.name != "" || ev.data != nil {
				ev.at = time.Now()
				if !fn(ev) {
					return nil
				}
			}
			ev = event{}
		case strings.HasPrefix(line, "event: "):
			ev.name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			ev.data = append(ev.data, line[len("data: "):]...)
		}
	}
}

// askResult is one streamed answer as the client saw it.
type askResult struct {
	status     int
	header     http.Header
	body       []byte // non-SSE replies
	events     []event
	sent       time.Time
	firstToken time.Time // zero: none
	done       *app.Trace
	requestID  string
	chatID     int64
}

// ask posts a question and reads the whole stream.
func (e *env) ask(ctx context.Context, t testing.TB, body map[string]any) (askResult, error) {
	r := e.req(t, "POST", "/api/ask", body).WithContext(ctx)
	res := askResult{sent: time.Now()}
	resp, err := e.client.Do(r)
	if err != nil {
		return res, err
	}
	defer resp.Body.Close()
	res.status, res.header = resp.StatusCode, resp.Header
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		res.body, err = io.ReadAll(resp.Body)
		return res, err
	}
	err = readSSE(resp.Body, func(ev event) bool {
		res.events = append(res.events, ev)
		switch ev.name {
		case "trace":
			var v struct {
				RequestID string `json:"request_id"`
				ChatID    int64  `json:"chat_id"`
			}
			json.Unmarshal(ev.data, &v)
			res.requestID, res.chatID = v.RequestID, v.ChatID
		case "token":
			if res.firstToken.IsZero() {
				res.firstToken = ev.at
			}
		case "done":
			res.done = new(app.Trace)
			if err := json.Unmarshal(ev.data, res.done); err != nil {
				res.done = nil
			} else if res.chatID == 0 {
				res.chatID = res.done.ChatID // a new chat's id comes with done
			}
		}
		return true
	})
	return res, err
}

// mustAsk asks and fails the test unless a complete stream came back.
func (e *env) mustAsk(t testing.TB, body map[string]any) askResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := e.ask(ctx, t, body)
	if err != nil {
		t.Fatalf("ask: %v", err)
	}
	if res.status != 200 || res.done == nil {
		t.Fatalf("ask: status %d, body %q, %d events, no done trace", res.status, res.body, len(res.events))
	}
	for _, ev := range res.events {
		if ev.name == "error" {
			t.Fatalf("ask: error event %s", ev.data)
		}
	}
	return res
}

// leakCheck records goroutines and open file descriptors now; its func
// waits (up to 10 s) for both to come back near that baseline.
func leakCheck(t *testing.T, e *env) func() {
	t.Helper()
	e.tr.CloseIdleConnections()
	settle()
	g0, f0 := runtime.NumGoroutine(), openFDs(t)
	return func() {
		t.Helper()
		const gSlack, fSlack = 8, 4
		var g, f int
		deadline := time.Now().Add(10 * time.Second)
		for {
			e.tr.CloseIdleConnections()
			g, f = runtime.NumGoroutine(), openFDs(t)
			if g <= g0+gSlack && f <= f0+fSlack {
				break
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("leak: goroutines %d → %d, open fds %d → %d (slack %d/%d)\n%s", g0, g, f0, f, gSlack, fSlack, buf)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("goroutines %d → %d, open fds %d → %d", g0, g, f0, f)
	}
}

func settle() {
	for range 3 {
		runtime.GC()
		time.Sleep(50 * time.Millisecond)
	}
}

func openFDs(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count fds: %v", err)
	}
	return len(ents)
}
