//go:build unix

package server_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lore/app"
	"lore/app/remote"
	"lore/engine"
)

// Embeddings are not tested against Ollama: v0.24.0 cannot serve the
// synthetic embedding model (checked again for issue 14, 2026-12). Its
// own engine does not take a qwen2 embedding model ("model not yet
// supported by Ollama engine, switching to compatibility mode … error=
// model not supported", also with OLLAMA_NEW_ENGINE=1), and its
// compatibility runner (runner/llamarunner) marks only a sequence's last
// token as an output while its patched llama.cpp decodes with
// output_all = false (llama-context.cpp), so mean pooling multiplies the
// one output row by the n-token mean matrix: `ggml.c:3183:
// GGML_ASSERT(ggml_can_mul_mat(a, b)) failed`, the runner aborts and
// /v1/embeddings answers 400 "do embedding request: … EOF". (Lore's runner
// marks every token as an output.) Ollama serves real embedding models
// (BERT-family) with its own engine; a synthetic one of that family would
// need a WordPiece tokenizer and another tensor layout. --embed-url is
// tested against lore serve's /v1/embeddings instead
// (TestRemoteEmbeddingsHeldToTheIndex, TestEmbeddingsEndpoint).

// ollama is a real `ollama serve` on loopback with its own model folder,
// serving the tiny synthetic chat model as "lore-tiny".
type ollama struct {
	base string // the OpenAI-compatible API, …/v1
	cmd  *exec.Cmd
	log  string // its serve log, written at debug level
	once sync.Once
}

const ollamaModel = "lore-tiny"

// startOllama runs the Ollama that `make test` builds from the module proxy
// with the project's cgo flags (LORE_OLLAMA) and creates the model.
func startOllama(t *testing.T) *ollama {
	t.Helper()
	bin := os.Getenv("LORE_OLLAMA")
	if bin == "" {
		t.Skip("LORE_OLLAMA is not set: `make test` builds Ollama from the module proxy and sets it")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	home := t.TempDir()
	env := append(os.Environ(), "OLLAMA_HOST="+addr, "OLLAMA_MODELS="+filepath.Join(home, "models"), "HOME="+home,
		"OLLAMA_NUM_PARALLEL=1", "OLLAMA_KEEP_ALIVE=10m", "OLLAMA_DEBUG=1")
	log, err := os.Create(filepath.Join(home, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env, cmd.Stdout, cmd.Stderr = env, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its model runners die with it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o := &ollama{base: "http://" + addr + "/v1", cmd: cmd, log: log.Name()}
	t.Cleanup(func() {
		o.kill()
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("ollama serve log (tail):\n%s", tail(string(b), 3000))
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; {
		if r, err := http.Get("http://" + addr + "/"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("ollama serve did not answer within 20 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	chat, _, _ := fixtures(t)
	mf := filepath.Join(home, "Modelfile")
	if err := os.WriteFile(mf, []byte("FROM "+chat+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	create := exec.Command(bin, "create", ollamaModel, "-f", mf)
	create.Env = env
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("ollama create: %v\n%s", err, tail(string(out), 2000))
	}
	return o
}

// kill stops the server and the model runners it started, once: a
// second SIGKILL could hit a process group that reused the id.
func (o *ollama) kill() {
	o.once.Do(func() {
		syscall.Kill(-o.cmd.Process.Pid, syscall.SIGKILL)
		o.cmd.Wait()
	})
}

// dyingProxy forwards connections to the server at base and kills it (kill)
// when its first response bytes come back, relaying none of them: the
// server dies with the request in hand, before the client sees a token,
// however fast this machine reads the prompt. It returns its own …/v1.
func dyingProxy(t *testing.T, base string, kill func()) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	upstream := strings.TrimSuffix(strings.TrimPrefix(base, "http://"), "/v1")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", upstream)
				if err != nil {
					return // killed already: the client sees a reset
				}
				defer up.Close()
				go io.Copy(up, c)
				if _, err := up.Read(make([]byte, 1)); err == nil {
					kill()
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/v1"
}

// slotReport is the runner's report on one request's prompt cache, logged
// at debug level as `msg="loading cache slot" … cache=C prompt=N used=M`:
// the slot held C tokens (the last request's prompt and what it
// generated), and of N prompt tokens M were used from it.
type slotReport struct{ Cache, Prompt, Used int }

// cacheSlots reads every cache slot report in the serve log, oldest first.
func (o *ollama) cacheSlots(t *testing.T) []slotReport {
	t.Helper()
	b, err := os.ReadFile(o.log)
	if err != nil {
		t.Fatal(err)
	}
	var reps []slotReport
	for line := range strings.Lines(string(b)) {
		if !strings.Contains(line, `msg="loading cache slot"`) {
			continue
		}
		var r slotReport
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "cache":
				r.Cache, _ = strconv.Atoi(v)
			case "prompt":
				r.Prompt, _ = strconv.Atoi(v)
			case "used":
				r.Used, _ = strconv.Atoi(v)
			}
		}
		reps = append(reps, r)
	}
	return reps
}

// cacheSlot is the report on the last request's prompt cache.
func (o *ollama) cacheSlot(t *testing.T) (prompt, used int) {
	t.Helper()
	reps := o.cacheSlots(t)
	if len(reps) == 0 {
		t.Fatal("no cache slot report in the serve log")
	}
	last := reps[len(reps)-1]
	return last.Prompt, last.Used
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// passagePrompt renders a prompt as Lore's pipeline does: instructions and
// words passages first, the question last. Random words from a seed, so
// that each seed is a prompt no server has cached.
func passagePrompt(t *testing.T, c *remote.Chat, seed uint64, words int, q string) string {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	for range words {
		b.WriteString(libWords[r.IntN(len(libWords))] + " ")
	}
	p, err := c.Template().Render([]engine.Message{{Role: "system", Content: "Answer from the passages.\n[1] " + b.String()},
		{Role: "user", Content: q}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRemoteChatAgainstOllama: Lore's remote chat client against a real
// Ollama (built from the module proxy) serving the tiny synthetic model:
// the answer streams with the server's token counts, a follow-up over the
// same passages is served from Ollama's prompt cache (its TTFT drops), a
// cancel stops the server's generation within a few tokens, a Lore app answers
// through it with a complete trace, and a server killed with the request
// in hand, before the first token, is ErrUnavailable (the app's cue to fall back to its local model)
// while one killed mid-answer is a plain error that keeps what streamed.
func TestRemoteChatAgainstOllama(t *testing.T) {
	o := startOllama(t)
	c, err := remote.NewChat(remote.Options{URL: o.base, Model: ollamaModel, FirstToken: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	gen := func(ctx context.Context, prompt string, n int, fn func(string) error) (engine.Stats, []string, error) {
		var pieces []string
		st, err := c.Generate(ctx, engine.GenerateRequest{Prompt: prompt, MaxTokens: n}, func(s string) error {
			pieces = append(pieces, s)
			if fn != nil {
				return fn(s)
			}
			return nil
		})
		return st, pieces, err
	}
	ctx := context.Background()

	t.Run("streams", func(t *testing.T) {
		st, pieces, err := gen(ctx, passagePrompt(t, c, 1, 50, "what about the river market"), 12, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d pieces, ttft %.1f ms, prompt %d tokens, %d decoded, stop %q", len(pieces), st.ClientTTFT, st.PromptTokens, st.DecodeTokens, st.StopReason)
		if len(pieces) < 2 || st.ClientTTFT <= 0 || st.PromptTokens <= 50 || st.DecodeTokens != 12 || st.StopReason != "length" {
			t.Errorf("pieces %q, stats %+v: want a streamed answer of 12 tokens with Ollama's prompt count", pieces, st)
		}
		if st.CachedTokens != remote.Unknown {
			t.Errorf("cached tokens %d: Ollama's OpenAI API does not report them, want unknown", st.CachedTokens)
		}
	})

	t.Run("follow-up served from the prompt cache", func(t *testing.T) {
		// The server's own cache report, not TTFT: timing is a benchmark's
		// job, and on a fast CPU a cold read of this tiny
		// model is close to a request's fixed cost.
		cold, _, err := gen(ctx, passagePrompt(t, c, 2, 800, "what about the river market"), 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		if prompt, used := o.cacheSlot(t); used > prompt/10 {
			t.Errorf("cold request used %d of %d prompt tokens from the cache: want only the template's head shared", used, prompt)
		}
		follow, _, err := gen(ctx, passagePrompt(t, c, 2, 800, "and the garden?"), 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		prompt, used := o.cacheSlot(t)
		t.Logf("ttft cold %.1f ms, follow-up %.1f ms; follow-up %d of %d prompt tokens from the cache", cold.ClientTTFT, follow.ClientTTFT, used, prompt)
		if prompt != follow.PromptTokens || used < prompt*9/10 {
			t.Errorf("follow-up: %d of %d prompt tokens from the cache (client counted %d): want the shared prefix read from Ollama's cache", used, prompt, follow.PromptTokens)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		before := len(o.cacheSlots(t))
		cctx, cancel := context.WithCancel(ctx)
		_, pieces, err := gen(cctx, passagePrompt(t, c, 3, 50, "tell me everything"), 2000, func(string) error {
			cancel()
			return nil
		})
		if !errors.Is(err, context.Canceled) || len(pieces) == 0 {
			t.Fatalf("after a cancel: err %v, %d pieces", err, len(pieces))
		}
		// One sequence at a time (OLLAMA_NUM_PARALLEL=1): the next request
		// gets the slot once the cancelled one left it, and finds there
		// that one's prompt and the tokens it generated: a few if the
		// cancel stopped it, up to 2,000 if it ran on (fewer only if the
		// model ended its answer by itself).
		st, _, err := gen(ctx, passagePrompt(t, c, 4, 20, "still there?"), 2, nil)
		if err != nil {
			t.Fatalf("the next request: %v", err)
		}
		// The runner's log reaches the serve log through a pipe: wait for
		// both reports (the bound only keeps a broken server from hanging
		// the test).
		reps := o.cacheSlots(t)
		for deadline := time.Now().Add(time.Minute); len(reps) < before+2 && time.Now().Before(deadline); reps = o.cacheSlots(t) {
			time.Sleep(20 * time.Millisecond)
		}
		if len(reps) < before+2 {
			t.Fatalf("%d cache slot reports in the serve log after the cancel: want the cancelled request's and the next one's", len(reps)-before)
		}
		cancelled, next := reps[before], reps[before+1]
		generated := next.Cache - cancelled.Prompt
		t.Logf("cancelled after %d piece(s); the server generated %d token(s) for it; the next request's ttft %.0f ms", len(pieces), generated, st.ClientTTFT)
		if generated < 0 || generated > 50 {
			t.Errorf("the slot held %d tokens after a %d-token prompt: want the cancelled answer stopped within a few tokens", next.Cache, cancelled.Prompt)
		}
	})

	t.Run("lore answers through ollama", func(t *testing.T) {
		chat, embed, lib := fixtures(t)
		a, err := app.New(ctx, app.Config{DataDir: t.TempDir(), ChatModel: chat, EmbedModel: embed, ChatURL: o.base,
			ChatURLModel: ollamaModel, WorkerCmd: []string{os.Args[0], "parse-worker"}})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if _, err := a.Index(ctx, "default", []string{lib}, nil); err != nil {
			t.Fatal(err)
		}
		answer, tr := mustAskApp(t, a, "what do the notes say about the river market")
		t.Logf("route %s, ttft %.1f ms, llm_ttft %.1f ms, prompt %d tokens, answer %q", tr.Route, tr.Stages[app.StageTTFT],
			tr.Stages[app.StageLLMTTFT], tr.PromptTokens, answer)
		if strings.TrimSpace(answer) == "" || !strings.HasPrefix(tr.Route, "remote:"+o.base) || strings.Contains(tr.FallbackReason, "remote") ||
			tr.PromptTokens <= 0 || tr.CachedTokens != remote.Unknown || tr.Stages[app.StageLLMTTFT] <= 0 || len(tr.TurnPassages) == 0 {
			t.Errorf("answer %q, trace %+v: want Ollama's answer with a complete trace", answer, tr)
		}
	})

	t.Run("killed mid-answer", func(t *testing.T) {
		_, pieces, err := gen(ctx, passagePrompt(t, c, 5, 50, "tell me everything"), 2000, func(string) error {
			o.kill()
			return nil
		})
		if err == nil || errors.Is(err, remote.ErrUnavailable) || len(pieces) == 0 {
			t.Errorf("err %v after %d pieces: want a plain error (no fallback once tokens are shown)", err, len(pieces))
		}
	})

	t.Run("killed before the first token", func(t *testing.T) {
		o := startOllama(t)
		c, err := remote.NewChat(remote.Options{URL: dyingProxy(t, o.base, o.kill), Model: ollamaModel, FirstToken: 60 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var pieces []string
		_, err = c.Generate(ctx, engine.GenerateRequest{Prompt: passagePrompt(t, c, 7, 100, "what about the market"), MaxTokens: 4},
			func(s string) error { pieces = append(pieces, s); return nil })
		if !errors.Is(err, remote.ErrUnavailable) || len(pieces) != 0 {
			t.Errorf("err %v, %d pieces: want ErrUnavailable before any token", err, len(pieces))
		}
	})
}
