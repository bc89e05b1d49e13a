package main

// The commands run in-process through run, the function main calls, with
// stdout and stderr captured; models are tiny synthetic ones written by
// the synth-model command itself, and run in the lore-runner programs
// (LORE_RUNNER_DIR, set by `make env`). The test binary doubles as the
// parse worker.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"lore/app"
	"lore/app/server"
)

func TestMain(m *testing.M) {
	app.MaybeServeWorker(os.Args) // a parse worker child process serves and exits here
	if os.Getenv(asLore) == "1" { // a child process standing in for bin/lore (loreCommand)
		os.Exit(run(context.Background(), os.Args[1:]))
	}
	os.Exit(m.Run())
}

// cli runs one command line in-process and returns its exit status and
// what it wrote.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	dir := t.TempDir()
	outF, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	errF, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = outF, errF
	func() {
		defer func() { os.Stdout, os.Stderr = oldOut, oldErr }()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		code = run(ctx, args)
	}()
	outF.Close()
	errF.Close()
	o, _ := os.ReadFile(outF.Name())
	e, _ := os.ReadFile(errF.Name())
	return code, string(o), string(e)
}

// object decodes stdout as one JSON object and checks that it has keys.
func object(t *testing.T, out string, keys ...string) map[string]any {
	t.Helper()
	var v map[string]any
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%.500s", err, out)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON value:\n%.500s", out)
	}
	for _, k := range keys {
		if _, ok := v[k]; !ok {
			t.Errorf("JSON has no %q: %.300s", k, out)
		}
	}
	return v
}

func TestCommands(t *testing.T) {
	dir := t.TempDir()
	chat, embed := filepath.Join(dir, "chat.gguf"), filepath.Join(dir, "embed.gguf")
	data, lib := filepath.Join(dir, "data"), filepath.Join(dir, "lib")
	sweepData := filepath.Join(dir, "sweep-data")
	os.MkdirAll(lib, 0o755)
	notes := map[string]string{
		"lighthouse.md": "# Lighthouses\n\nThe lighthouse keeper trimmed the wick every night and wound the clockwork.\n",
		"tides.md":      "# Tides\n\nTides rise and fall twice a day because the moon pulls the oceans.\n",
		"bees.txt":      "A honeybee colony has one queen and thousands of workers.\n",
	}
	for name, text := range notes {
		if err := os.WriteFile(filepath.Join(lib, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	queries, badQueries := filepath.Join(dir, "q.jsonl"), filepath.Join(dir, "bad.jsonl")
	os.WriteFile(queries, []byte(`{"query": "who trims the wick of the lighthouse", "relevant": ["lighthouse.md"]}`+"\n"+
		`{"query": "why do tides rise twice a day", "relevant": ["tides.md"]}`+"\n"), 0o644)
	os.WriteFile(badQueries, []byte(`{"query": "bees", "relevant": ["bee.txt"]}`+"\n"), 0o644)
	// d is a command line of the library in data.
	d := func(cmd string, rest ...string) []string { return append([]string{cmd, "--data", data}, rest...) }

	// In order: later commands use the models and the index earlier ones make.
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string                         // a substring of stderr
		check  func(t *testing.T, out string) // stdout
	}{
		{name: "no command", args: nil, code: 0, stderr: "commands:"},
		{name: "help", args: []string{"help"}, code: 0, stderr: "serve"},
		{name: "unknown command", args: []string{"nosuch"}, code: 2, stderr: `unknown command "nosuch"`},
		{name: "command help", args: []string{"index", "-h"}, code: 0, stderr: "-workspace"},
		{name: "unknown flag", args: []string{"search", "--nosuch"}, code: 1, stderr: "nosuch"},

		{name: "synth-model without --out", args: []string{"synth-model"}, code: 1, stderr: "--out is required"},
		{name: "synth-model unknown shape", args: []string{"synth-model", "--shape", "huge", "--out", filepath.Join(dir, "x.gguf")}, code: 1},
		{name: "synth-model chat", args: []string{"synth-model", "--shape", "tiny", "--out", chat}, code: 0,
			check: func(t *testing.T, _ string) { mustExist(t, chat) }},
		{name: "synth-model embedding", args: []string{"synth-model", "--shape", "tiny", "--embedding", "--seed", "2", "--out", embed}, code: 0,
			check: func(t *testing.T, _ string) { mustExist(t, embed) }},

		{name: "index a missing folder", args: d("index", "--json", filepath.Join(dir, "nosuch")), code: 1, stderr: "nosuch"},
		{name: "index", args: d("index", "--embed-model", embed, "--json", lib), code: 0,
			check: func(t *testing.T, out string) {
				v := object(t, out, "files", "indexed", "unchanged", "skipped", "chunks", "embedded", "errors", "seconds")
				if v["indexed"] != float64(len(notes)) || v["embedded"].(float64) < float64(len(notes)) {
					t.Errorf("index summary %v: want %d indexed and embedded", v, len(notes))
				}
			}},
		{name: "index again: unchanged", args: d("index", "--embed-model", embed, "--json", lib), code: 0,
			check: func(t *testing.T, out string) {
				if v := object(t, out, "unchanged"); v["unchanged"] != float64(len(notes)) || v["indexed"] != 0.0 {
					t.Errorf("second index %v: want everything unchanged", v)
				}
			}},

		{name: "search without a query", args: d("search"), code: 1, stderr: "what should I look for"},
		{name: "search an unknown workspace", args: d("search", "--workspace", "nosuch", "lighthouse"), code: 1, stderr: "not found"},
		{name: "search", args: d("search", "--embed-model", embed, "--json", "lighthouse keeper"), code: 0,
			check: func(t *testing.T, out string) {
				v := object(t, out, "passages", "mode", "stages")
				ps, _ := v["passages"].([]any)
				if len(ps) == 0 {
					t.Fatalf("no passages: %.300s", out)
				}
				p := ps[0].(map[string]any)
				for _, k := range []string{"chunk_id", "document", "path", "text", "scores"} {
					if _, ok := p[k]; !ok {
						t.Errorf("passage has no %q: %v", k, p)
					}
				}
				if !strings.Contains(p["document"].(string), "lighthouse") {
					t.Errorf("top passage from %v, want lighthouse.md", p["document"])
				}
			}},
		{name: "search, text", args: d("search", "lighthouse"), code: 0,
			check: func(t *testing.T, out string) {
				if !strings.Contains(out, "lighthouse.md") || !strings.Contains(out, "retrieval") {
					t.Errorf("text output:\n%s", out)
				}
			}},

		{name: "ask without a question", args: d("ask"), code: 1, stderr: "what is the question"},
		{name: "ask", args: d("ask", "--model", chat, "--embed-model", embed, "--json", "who trims the wick?"), code: 0,
			check: func(t *testing.T, out string) {
				v := object(t, out, "request_id", "stages", "route", "prompt_tokens", "decode_tokens")
				st, _ := v["stages"].(map[string]any)
				if _, ok := st["ttft_ms"]; !ok {
					t.Errorf("trace stages without ttft_ms: %v", st)
				}
				if v["route"] != "chat.gguf" && !strings.Contains(fmt.Sprint(v["route"]), "chat") {
					t.Errorf("route %v", v["route"])
				}
			}},

		{name: "traces", args: d("traces", "--json"), code: 0,
			check: func(t *testing.T, out string) {
				v := object(t, out, "recent", "stats")
				if r, _ := v["recent"].([]any); len(r) != 1 {
					t.Errorf("recent traces %v, want the one ask", v["recent"])
				}
				object(t, mustJSON(t, v["stats"]), "window", "n", "stages", "by_bucket", "by_fallback")
			}},
		{name: "traces, bad window", args: d("traces", "--window", "fortnight"), code: 1},
		{name: "models", args: d("models", "--json"), code: 0,
			check: func(t *testing.T, out string) {
				v := object(t, out, "models", "system")
				object(t, mustJSON(t, v["system"]), "cpu", "loaded")
			}},
		{name: "cpu", args: []string{"cpu", "--json"}, code: 0,
			check: func(t *testing.T, out string) { object(t, out, "features", "variants", "best", "runner", "variant") }},
		{name: "eval without a kind", args: d("eval"), code: 1, stderr: "which one"},
		{name: "eval without queries", args: []string{"eval", "retrieval", "--data", data}, code: 1, stderr: "--queries"},
		{name: "eval, candidate sweep", args: []string{"eval", "retrieval", "--data", data, "--queries", queries, "--candidates", "5,20", "--json"}, code: 0,
			check: func(t *testing.T, out string) {
				var v struct{ Sweep []app.EvalReport }
				if err := json.Unmarshal([]byte(out), &v); err != nil || len(v.Sweep) != 2 || v.Sweep[1].Candidates != 20 ||
					v.Sweep[0].BM25.MRR != 1 || v.Sweep[0].SearchP95Ms <= 0 {
					t.Errorf("sweep %+v (%v)", v.Sweep, err)
				}
			}},
		{name: "eval, bad candidates", args: []string{"eval", "retrieval", "--data", data, "--queries", queries, "--candidates", "5,x"}, code: 1, stderr: "--candidates"},
		{name: "eval, a label naming no document", args: []string{"eval", "retrieval", "--data", data, "--queries", badQueries}, code: 1, stderr: "not a document"},
		{name: "bench retrieval sweep", args: []string{"bench", "retrieval", "--sweep", "--sweep-sizes", "2000", "--sweep-ef", "4,64", "--data", sweepData, "--json"}, code: 0,
			check: func(t *testing.T, out string) {
				var v struct {
					Sweep []app.SweepSize `json:"hnsw_sweep"`
				}
				if err := json.Unmarshal([]byte(out), &v); err != nil || len(v.Sweep) != 1 || len(v.Sweep[0].Points) != 2 {
					t.Fatalf("sweep %s (%v)", out, err)
				}
				if p := v.Sweep[0].Points; p[1].Recall10 < p[0].Recall10 || p[1].Recall10 < 0.9 || p[0].P50Ms <= 0 {
					t.Errorf("efSearch 4 → 64: %+v", p)
				}
				// Saved where Settings reads it.
				a, err := app.New(context.Background(), app.Config{DataDir: sweepData})
				if err != nil {
					t.Fatal(err)
				}
				defer a.Close()
				if saved, err := a.Sweep(context.Background()); err != nil || !reflect.DeepEqual(saved.Sizes, v.Sweep) || saved.MeasuredAt.IsZero() {
					t.Errorf("saved sweep %+v (%v), want %+v", saved, err, v.Sweep)
				}
			}},
	}
	for _, c := range cases {
		ok := t.Run(c.name, func(t *testing.T) {
			code, out, errOut := cli(t, c.args...)
			if code != c.code {
				t.Fatalf("lore %s: exit %d, want %d\nstdout: %.500s\nstderr: %.1000s", strings.Join(c.args, " "), code, c.code, out, errOut)
			}
			if c.stderr != "" && !strings.Contains(errOut, c.stderr) {
				t.Errorf("stderr lacks %q:\n%.1000s", c.stderr, errOut)
			}
			if c.check != nil {
				c.check(t, out)
			}
		})
		if !ok && c.code == 0 && c.check != nil {
			t.Fatalf("%s failed; the commands after it depend on it", c.name)
		}
	}
}

func mustExist(t *testing.T, path string) {
	t.Helper()
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("%s: %v", path, err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestServe: `lore serve` prints the URL with the token in its fragment
// and the /v1 key; the token is fresh each run unless pinned; the data
// folder and the token files are private.
func TestServe(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o755); err != nil { // as an older Lore or the user left it
		t.Fatal(err)
	}
	urlRE := regexp.MustCompile(`^http://127\.0\.0\.1:(\d+)/#token=([0-9a-f]{48})$`)
	keyRE := regexp.MustCompile(`API key (lore-v1-[0-9a-f]{48})`)

	type running struct {
		base, token, key string
		stop             func() int
	}
	serve := func(t *testing.T, extra ...string) running {
		t.Helper()
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		errF, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
		if err != nil {
			t.Fatal(err)
		}
		oldOut, oldErr := os.Stdout, os.Stderr
		os.Stdout, os.Stderr = pw, errF
		ctx, cancel := context.WithCancel(context.Background())
		exited := make(chan int, 1)
		go func() {
			exited <- run(ctx, append([]string{"serve", "--data", data, "--addr", "127.0.0.1:0"}, extra...))
		}()
		restore := func() {
			os.Stdout, os.Stderr = oldOut, oldErr
			pw.Close()
		}
		line := make(chan string, 1)
		go func() {
			l, _ := bufio.NewReader(pr).ReadString('\n')
			line <- strings.TrimSpace(l)
			io.Copy(io.Discard, pr)
		}()
		var first string
		select {
		case first = <-line:
		case code := <-exited:
			restore()
			b, _ := os.ReadFile(errF.Name())
			t.Fatalf("serve exited %d before printing its URL: %s", code, b)
		case <-time.After(2 * time.Minute):
			t.Fatal("serve printed no URL within 2 minutes")
		}
		// The key line follows the URL on stderr; stdout and stderr stay
		// redirected until it is there.
		var key string
		for deadline := time.Now().Add(30 * time.Second); key == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			b, _ := os.ReadFile(errF.Name())
			if k := keyRE.FindStringSubmatch(string(b)); k != nil {
				key = k[1]
			}
		}
		restore()
		m := urlRE.FindStringSubmatch(first)
		if m == nil {
			t.Fatalf("first line %q, want http://127.0.0.1:PORT/#token=TOKEN", first)
		}
		if key == "" {
			b, _ := os.ReadFile(errF.Name())
			t.Fatalf("serve did not print the /v1 API key: %s", b)
		}
		r := running{base: "http://127.0.0.1:" + m[1], token: m[2], key: key}
		r.stop = func() int {
			cancel()
			select {
			case code := <-exited:
				return code
			case <-time.After(30 * time.Second):
				t.Fatal("serve did not stop within 30 s of its context ending")
				return -1
			}
		}
		return r
	}
	status := func(t *testing.T, method, url, token string) int {
		t.Helper()
		req, _ := http.NewRequest(method, url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	perm := func(t *testing.T, name string) os.FileMode {
		t.Helper()
		st, err := os.Stat(filepath.Join(data, name))
		if err != nil {
			t.Fatal(err)
		}
		return st.Mode().Perm()
	}

	s1 := serve(t)
	for _, c := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/api/workspaces", s1.token, 200},
		{"GET", "/api/workspaces", s1.key, 403},
		{"GET", "/v1/models", s1.key, 200},
		{"GET", "/v1/models", s1.token, 200},
		{"GET", "/api/workspaces", "wrong", 401},
	} {
		if got := status(t, c.method, s1.base+c.path, c.token); got != c.want {
			t.Errorf("%s %s with %.14s…: %d, want %d", c.method, c.path, c.token, got, c.want)
		}
	}
	if m := perm(t, "."); m != 0o700 {
		t.Errorf("data folder %v, want 0700", m)
	}
	for _, f := range []string{server.TokenFile, server.OpenAITokenFile, "lore.db"} {
		if m := perm(t, f); m != 0o600 {
			t.Errorf("%s %v, want 0600", f, m)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(data, server.TokenFile)); strings.TrimSpace(string(b)) != s1.token {
		t.Errorf("token file %q, want the printed token", b)
	}
	if code := s1.stop(); code != 0 {
		t.Errorf("serve exited %d after Ctrl-C, want 0", code)
	}

	// The next run: a fresh token, the same /v1 key.
	s2 := serve(t)
	if s2.token == s1.token {
		t.Error("the token did not rotate between two runs")
	}
	if s2.key != s1.key {
		t.Errorf("the /v1 key changed between runs: %s → %s", s1.key, s2.key)
	}
	if got := status(t, "GET", s2.base+"/api/workspaces", s1.token); got != 401 {
		t.Errorf("the previous run's token: %d, want 401", got)
	}
	s2.stop()

	// Pinned: --keep-token reuses the last one; $LORE_TOKEN sets it.
	s3 := serve(t, "--keep-token")
	if s3.token != s2.token {
		t.Errorf("--keep-token: %s, want the previous run's %s", s3.token, s2.token)
	}
	s3.stop()
	pinned := strings.Repeat("0123456789abcdef", 3)
	t.Setenv("LORE_TOKEN", pinned)
	s4 := serve(t)
	if s4.token != pinned {
		t.Errorf("$LORE_TOKEN: printed %s", s4.token)
	}
	s4.stop()
	t.Setenv("LORE_TOKEN", "short")
	if code, _, errOut := cli(t, "serve", "--data", data, "--addr", "127.0.0.1:0"); code != 1 || !strings.Contains(errOut, "LORE_TOKEN") {
		t.Errorf("a short $LORE_TOKEN: exit %d, %s", code, errOut)
	}
}
