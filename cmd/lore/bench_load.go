package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"lore/app"
	"lore/app/server"
	"lore/engine/synth"
	"lore/index/sample"
)

// loadBench is what `lore bench load --json` prints.
type loadBench struct {
	Concurrency  int      `json:"concurrency"`
	Requests     int      `json:"requests"`
	Accepted     int      `json:"accepted"`
	Refused429   int      `json:"refused_429"`
	Failed       int      `json:"failed"`
	TTFTms       loadPct  `json:"ttft_ms"`
	Max429ms     float64  `json:"max_429_ms"`
	Throughput   float64  `json:"throughput_rps"`
	GoroutinesB  int      `json:"goroutines_before"`
	GoroutinesA  int      `json:"goroutines_after"`
	FDsBefore    int      `json:"fds_before"`
	FDsAfter     int      `json:"fds_after"`
	Seconds      float64  `json:"seconds"`
	MaxTokens    int      `json:"max_tokens"`
	Queue        int      `json:"queue_capacity"`
	FDLimit      uint64   `json:"fd_limit"`
	ServerUp     bool     `json:"server_up"`
	FailureNotes []string `json:"failure_samples,omitempty"`
}

type loadPct struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// benchLoad starts Lore's HTTP server in this process on 127.0.0.1:0 and
// drives it with many concurrent streaming clients: every request must get
// either a stream that ends with `done` or a prompt 429, the server must stay
// up, and goroutines and file descriptors must come back to where they were.
func benchLoad(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench load", flag.ContinueOnError)
	data := fs.String("data", "", "data `folder` of an indexed library (default: a temporary one with synthetic models and the sample library)")
	model := fs.String("model", "", "chat model GGUF `file` (default: a synthetic tiny model)")
	embedModel := fs.String("embed-model", "", "embedding model GGUF `file` (default: a synthetic tiny model)")
	workspace := fs.String("workspace", "default", "workspace `name` to ask in")
	concurrency := fs.Int("concurrency", 500, "concurrent streaming clients")
	requests := fs.Int("requests", 1000, "asks in all")
	maxTokens := fs.Int("max-tokens", 16, "tokens per answer, for the temporary library only (a --data folder keeps its settings)")
	queue := fs.Int("queue", app.DefaultQueueCapacity, "the app's queue capacity")
	timeout := fs.Duration("timeout", 5*time.Minute, "per-request limit")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	if *concurrency < 1 || *requests < 1 {
		return errors.New("bench load: --concurrency and --requests must be positive")
	}
	// Each client holds a socket and so does the server's side of it: 500
	// clients need more than the usual soft limit of 1024 descriptors.
	limit, err := raiseFDLimit()
	switch {
	case err != nil:
		fmt.Fprintf(os.Stderr, "bench load: could not raise the open-file limit: %v\n", err)
	case !*asJSON:
		fmt.Fprintf(os.Stderr, "open-file limit %d (soft = hard)\n", limit)
	}
	if need := uint64(2**concurrency + 128); limit < need {
		fmt.Fprintf(os.Stderr, "bench load: open-file limit %d is below the ~%d this run needs; expect failures\n", limit, need)
	}

	a, cleanup, err := loadApp(ctx, *data, *model, *embedModel, *workspace, *queue, *maxTokens, !*asJSON)
	if err != nil {
		return err
	}
	defer cleanup()
	ln, err := server.Listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	token, err := server.LoadToken(a.DataDir())
	if err != nil {
		return err
	}
	srv := server.New(a, token, ln, server.Options{})
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	defer func() {
		stop()
		<-served
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", ln.Addr().(*net.TCPAddr).Port)

	tr := &http.Transport{
		MaxConnsPerHost: *concurrency, MaxIdleConnsPerHost: *concurrency, MaxIdleConns: *concurrency,
		IdleConnTimeout: 30 * time.Second, DisableCompression: true,
		DialContext: (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	}
	client := &http.Client{Transport: tr}
	lc := loadClient{client: client, base: base, token: token, workspace: *workspace, timeout: *timeout}

	// Warm up (model loaded, pools filled), then take the baseline.
	if r := lc.ask(ctx, "warm-up question about the handbook"); r.kind != outcomeOK {
		return fmt.Errorf("bench load: warm-up ask failed: %s", r.note)
	}
	tr.CloseIdleConnections()
	settleRuntime()
	res := loadBench{Concurrency: *concurrency, Requests: *requests, MaxTokens: a.Settings().MaxTokens, FDLimit: limit,
		Queue: *queue, GoroutinesB: runtime.NumGoroutine(), FDsBefore: countFDs()}

	questions := []string{"How many days of holiday do employees get?", "What powers the irrigation controller?",
		"How is SQLite used in the notes?", "What did the minutes decide?", "Which recipe needs the oven?"}
	var next atomic.Int64
	var mu sync.Mutex
	var ttfts []float64
	start := time.Now()
	var wg sync.WaitGroup
	for range *concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= *requests || ctx.Err() != nil {
					return
				}
				r := lc.ask(ctx, questions[i%len(questions)])
				mu.Lock()
				switch r.kind {
				case outcomeOK:
					res.Accepted++
					ttfts = append(ttfts, r.ttft)
				case outcome429:
					res.Refused429++
					res.Max429ms = max(res.Max429ms, r.elapsed)
				default:
					res.Failed++
					if len(res.FailureNotes) < 5 {
						res.FailureNotes = append(res.FailureNotes, r.note)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	res.Seconds = round1(elapsed)
	if elapsed > 0 {
		res.Throughput = round1(float64(res.Accepted) / elapsed)
	}
	res.Max429ms = round1(res.Max429ms)
	slices.Sort(ttfts)
	res.TTFTms = loadPct{P50: round1(pctOf(ttfts, 0.50)), P95: round1(pctOf(ttfts, 0.95)), P99: round1(pctOf(ttfts, 0.99))}
	if ctx.Err() != nil {
		return ctx.Err()
	}

	// The server is still up and answers.
	res.ServerUp = lc.ask(ctx, "one more question after the load").kind == outcomeOK

	// Leaks: let connections close and goroutines finish, then compare.
	deadline := time.Now().Add(15 * time.Second)
	for {
		tr.CloseIdleConnections()
		settleRuntime()
		res.GoroutinesA, res.FDsAfter = runtime.NumGoroutine(), countFDs()
		if res.GoroutinesA <= res.GoroutinesB+8 && res.FDsAfter <= res.FDsBefore+8 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}

	if *asJSON {
		return printJSON(res)
	}
	fmt.Printf("%-22s %d\n", "concurrency", res.Concurrency)
	fmt.Printf("%-22s %d\n", "requests", res.Requests)
	fmt.Printf("%-22s %d\n", "accepted (streamed)", res.Accepted)
	fmt.Printf("%-22s %d (slowest %.1f ms)\n", "refused 429", res.Refused429, res.Max429ms)
	fmt.Printf("%-22s %d\n", "failed", res.Failed)
	fmt.Printf("%-22s p50 %.1f  p95 %.1f  p99 %.1f ms\n", "client TTFT", res.TTFTms.P50, res.TTFTms.P95, res.TTFTms.P99)
	fmt.Printf("%-22s %.1f answers/s over %.1f s\n", "throughput", res.Throughput, res.Seconds)
	fmt.Printf("%-22s %d → %d\n", "goroutines", res.GoroutinesB, res.GoroutinesA)
	fmt.Printf("%-22s %d → %d (limit %d)\n", "open fds", res.FDsBefore, res.FDsAfter, res.FDLimit)
	fmt.Printf("%-22s %v\n", "server up after", res.ServerUp)
	for _, n := range res.FailureNotes {
		fmt.Printf("  failure: %s\n", n)
	}
	return nil
}

// loadApp opens the app: the given data folder, or a temporary one with
// synthetic tiny models and the indexed sample library.
func loadApp(ctx context.Context, data, model, embed, workspace string, queue, maxTokens int, verbose bool) (*app.App, func(), error) {
	cleanup := func() {}
	fresh := data == ""
	if fresh {
		dir, err := os.MkdirTemp("", "lore-bench-load")
		if err != nil {
			return nil, nil, err
		}
		cleanup = func() { os.RemoveAll(dir) }
		data = filepath.Join(dir, "data")
		for _, m := range []struct {
			dst  *string
			name string
			opt  synth.Options
		}{{&model, "chat.gguf", synth.Options{Shape: "tiny", Seed: 1}}, {&embed, "embed.gguf", synth.Options{Shape: "tiny", Embedding: true, Seed: 2}}} {
			if *m.dst != "" {
				continue
			}
			*m.dst = filepath.Join(dir, m.name)
			if err := synth.Write(*m.dst, m.opt); err != nil {
				cleanup()
				return nil, nil, err
			}
		}
		if err := sample.WriteCorpus(filepath.Join(dir, "library")); err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	a, err := app.New(ctx, app.Config{DataDir: data, ChatModel: model, EmbedModel: embed, QueueCapacity: queue, Warm: true})
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	done := func() {
		a.Close()
		cleanup()
	}
	// The user's own library keeps its settings: saving would also keep the
	// one-run --model overrides app.New applied.
	if fresh && maxTokens > 0 {
		s := a.Settings()
		s.MaxTokens = maxTokens
		if err := a.SaveSettings(ctx, s); err != nil {
			done()
			return nil, nil, err
		}
	}
	if fresh {
		if verbose {
			fmt.Fprintln(os.Stderr, "indexing the sample library with synthetic tiny models…")
		}
		if _, err := a.Index(ctx, workspace, []string{filepath.Join(filepath.Dir(data), "library")}, nil); err != nil {
			done()
			return nil, nil, err
		}
	}
	if err := a.WaitWarm(ctx); err != nil {
		done()
		return nil, nil, err
	}
	return a, done, nil
}

type loadClient struct {
	client    *http.Client
	base      string
	token     string
	workspace string
	timeout   time.Duration
}

const (
	outcomeOK = iota
	outcome429
	outcomeFailed
)

type loadOutcome struct {
	kind    int
	ttft    float64 // ms, request sent → first token event read
	elapsed float64 // ms, whole request
	note    string
}

// ask sends one question and reads its stream to the end.
func (c loadClient) ask(ctx context.Context, q string) loadOutcome {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"question": q, "workspace": c.workspace})
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+"/api/ask", bytes.NewReader(body))
	if err != nil {
		return loadOutcome{kind: outcomeFailed, note: err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	sent := time.Now()
	since := func() float64 { return float64(time.Since(sent).Microseconds()) / 1000 }
	resp, err := c.client.Do(req)
	if err != nil {
		return loadOutcome{kind: outcomeFailed, elapsed: since(), note: err.Error()}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		io.Copy(io.Discard, resp.Body)
		if resp.Header.Get("Retry-After") == "" {
			return loadOutcome{kind: outcomeFailed, elapsed: since(), note: "429 without Retry-After"}
		}
		return loadOutcome{kind: outcome429, elapsed: since()}
	case resp.StatusCode != http.StatusOK:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return loadOutcome{kind: outcomeFailed, elapsed: since(), note: fmt.Sprintf("status %d: %s", resp.StatusCode, b)}
	}
	out := loadOutcome{kind: outcomeFailed, note: "stream ended without done"}
	br := bufio.NewReader(resp.Body)
	event := ""
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if out.note == "stream ended without done" && err != io.EOF {
				out.note = err.Error()
			}
			break
		}
		line = strings.TrimRight(line, "\r\n")
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			event = name
			continue
		}
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		switch event {
		case "token":
			if out.ttft == 0 {
				out.ttft = since()
			}
		case "error":
			out.note = "error event: " + strings.TrimPrefix(line, "data: ")
		case "done":
			if out.ttft > 0 && !strings.HasPrefix(out.note, "error event") {
				out.kind, out.note = outcomeOK, ""
			} else if out.ttft == 0 {
				out.note = "done without a token"
			}
		}
	}
	out.elapsed = since()
	return out
}

// raiseFDLimit sets the soft open-file limit to the hard one and returns it.
func raiseFDLimit() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			return rl.Cur, err
		}
	}
	return rl.Cur, nil
}

// countFDs counts this process's open file descriptors (-1 where /proc is
// missing).
func countFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

func settleRuntime() {
	for range 3 {
		runtime.GC()
		time.Sleep(100 * time.Millisecond)
	}
}

// pctOf is the q-quantile of sorted xs (nearest rank), 0 when empty.
func pctOf(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(q*float64(len(xs))+0.5) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}
