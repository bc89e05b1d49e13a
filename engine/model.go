// Package engine runs GGUF models on the device. Each Model is a llama.cpp
// runner in a supervised child process (the same binary, re-executed), so a
// crash inside llama.cpp costs one request, not the app. The engine keeps the
// longest common prefix of consecutive prompts in the KV cache and queues
// concurrent callers.
package engine

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"lore/engine/cpu"
	"lore/engine/gguf"
	"lore/engine/wire"
)

// Stats and Sampling are the wire protocol's types, part of the engine's API.
type (
	Stats    = wire.Stats
	Sampling = wire.Sampling
)

// Options configures a Model. Zero values take defaults.
type Options struct {
	Path      string // GGUF file
	NumCtx    int    // context tokens (default 4096, capped by the model's)
	Batch     int    // tokens per decode call (default 512)
	Seqs      int    // parallel sequences (default 1)
	Threads   int    // default: physical cores
	GPULayers int
	// FlashAttention is "auto", "on" or "off" (default "off": CPU prefill
	// measured 1.27x faster at 1,024 tokens and 1.63x at 3,000, see README).
	FlashAttention string
	// QueueCapacity bounds waiting callers; beyond it calls fail with ErrBusy
	// (default 64, negative means unbounded).
	QueueCapacity int
	// Runner is the runner program (default: the best lore-runner-<variant>
	// for this CPU, see engine/cpu).
	Runner string
}

// Info describes a loaded model.
type Info struct {
	gguf.Info
	Path     string `json:"path"`
	Template string `json:"template"`
	NumCtx   int    `json:"num_ctx"`
	Threads  int    `json:"threads"`
	// CPUVariant is the runner build in use (avx512, avx2, …).
	CPUVariant string `json:"cpu_variant"`
}

// RunnerInfo is what the runner reported about itself when it loaded the
// model: llama.cpp's CPU feature line and where the weights went
// (CPU_REPACK, AMX, CPU_Mapped, a GPU…), read from its log.
type RunnerInfo struct {
	System  string   `json:"system"`
	Buffers []string `json:"weight_buffers"`
}

// Model is one GGUF model served by a supervised runner process.
type Model struct {
	id    string
	opt   Options
	info  Info
	tmpl  *Template
	queue *Queue

	mu     sync.Mutex // guards proc, warm, loaded and closed
	proc   *process
	warm   string // prompt prefix to restore after a restart
	loaded RunnerInfo
	closed bool
}

// Open validates the file's GGUF header and prepares a model. The runner
// starts on first use (or Start).
func Open(opt Options) (*Model, error) {
	f, err := gguf.Open(opt.Path)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", opt.Path, err)
	}
	gi := f.Info()
	if opt.Batch <= 0 {
		opt.Batch = 512
	}
	if opt.Seqs <= 0 {
		opt.Seqs = 1
	}
	if opt.NumCtx <= 0 {
		opt.NumCtx = 4096
		if gi.PoolingType > gguf.PoolingNone {
			opt.NumCtx = opt.Batch // one text at a time
		}
	}
	if gi.ContextLength > 0 && uint64(opt.NumCtx) > gi.ContextLength {
		opt.NumCtx = int(gi.ContextLength)
	}
	if opt.Threads <= 0 {
		opt.Threads = cpu.PhysicalCores()
	}
	if opt.FlashAttention == "" {
		opt.FlashAttention = "off"
	}
	if opt.QueueCapacity == 0 {
		opt.QueueCapacity = 64
	}
	variant := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(opt.Runner), cpu.RunnerPrefix), ".exe")
	if opt.Runner == "" {
		r, err := cpu.Default()
		if err != nil {
			return nil, err
		}
		opt.Runner, variant = r.Path, r.Variant.Name
	}
	tmpl := TemplateFor(gi.ChatTemplate)
	st, err := os.Stat(opt.Path)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s|%d|%d", filepath.Base(opt.Path), st.Size(), st.ModTime().UnixNano()))
	return &Model{
		id:    fmt.Sprintf("%s@%x", strings.TrimSuffix(filepath.Base(opt.Path), ".gguf"), sum[:4]),
		opt:   opt,
		tmpl:  tmpl,
		queue: NewQueue(max(opt.QueueCapacity, 0)),
		info: Info{Info: gi, Path: opt.Path, Template: tmpl.Name,
			NumCtx: opt.NumCtx, Threads: opt.Threads, CPUVariant: variant},
	}, nil
}

// Info describes the model.
func (m *Model) Info() Info { return m.info }

// ID identifies the model file (name, size and modification time), for
// version ids and embedding records: a replaced file gets a new ID.
func (m *Model) ID() string { return m.id }

// Template is the model's prompt format.
func (m *Model) Template() *Template { return m.tmpl }

// Runner reports what the runner said when it last loaded the model (zero
// before it has).
func (m *Model) Runner() RunnerInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.loaded
}

// noteLog keeps the runner's log lines that describe the build and the
// weights' buffers.
func (m *Model) noteLog(line string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, sys, ok := strings.Cut(line, " INFO system "); ok {
		m.loaded = RunnerInfo{System: sys} // a fresh load
	} else if i := strings.Index(line, " model buffer size"); i > 0 && strings.HasPrefix(line, "load_tensors:") {
		m.loaded.Buffers = append(m.loaded.Buffers, strings.Join(strings.Fields(line[len("load_tensors:"):i]), " ")+
			" "+strings.TrimSpace(strings.TrimPrefix(line[i+len(" model buffer size"):], " =")))
	}
}

// Start starts the runner and loads the model now rather than on first use.
func (m *Model) Start(ctx context.Context) error {
	release, _, err := m.queue.Acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	_, err = m.runner(ctx)
	return err
}

// RunnerPID is the runner's process id, 0 when none is running.
func (m *Model) RunnerPID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil || !m.proc.alive() {
		return 0
	}
	return m.proc.cmd.Process.Pid
}

// Close stops the runner, freeing the model's memory.
func (m *Model) Close() error {
	m.mu.Lock()
	p := m.proc
	m.proc, m.closed = nil, true
	m.mu.Unlock()
	if p != nil {
		p.close()
	}
	return nil
}

// runner returns a live runner with the model loaded and the warm prefix in
// its cache, starting a fresh one if the last died. The caller holds the queue.
func (m *Model) runner(ctx context.Context) (*process, error) {
	m.mu.Lock()
	p, warm, closed := m.proc, m.warm, m.closed
	m.mu.Unlock()
	switch {
	case closed:
		return nil, ErrClosed
	case p != nil && p.alive():
		return p, nil
	}
	// The file is checked again before every (re)load: it may have been
	// replaced since Open, and llama.cpp must never see an unchecked file.
	if _, err := gguf.Open(m.opt.Path); err != nil {
		return nil, fmt.Errorf("model %s: %w", m.opt.Path, err)
	}
	p, err := startProcess(m.opt.Runner, m.noteLog)
	if err != nil {
		return nil, err
	}
	load := &wire.LoadParams{Path: m.opt.Path, NumCtx: m.opt.NumCtx, Batch: m.opt.Batch, Seqs: m.opt.Seqs,
		Threads: m.opt.Threads, GPULayers: m.opt.GPULayers, FlashAttention: m.opt.FlashAttention,
		Pooling: max(int(m.info.PoolingType), 0)}
	err = p.call(ctx, wire.Request{Op: "load", Load: load}, func(wire.Reply) error { return nil })
	if err != nil {
		p.close()
		return nil, fmt.Errorf("load %s: %w", filepath.Base(m.opt.Path), err)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		p.close()
		return nil, ErrClosed
	}
	m.proc = p
	m.mu.Unlock()
	if warm != "" {
		if err := p.call(ctx, wire.Request{Op: "prefill", Text: warm}, func(wire.Reply) error { return nil }); err != nil {
			return nil, fmt.Errorf("warm prefix: %w", err)
		}
	}
	return p, nil
}

// ErrClosed is returned by a Model after Close.
var ErrClosed = errors.New("model closed")

// do runs one request under the queue and returns the time it waited.
func (m *Model) do(ctx context.Context, req wire.Request, fn func(wire.Reply) error) (time.Duration, error) {
	release, waited, err := m.queue.Acquire(ctx)
	if err != nil {
		return waited, err
	}
	defer release()
	p, err := m.runner(ctx)
	if err != nil {
		return waited, err
	}
	return waited, p.call(ctx, req, fn)
}

// GenerateRequest is one completion.
type GenerateRequest struct {
	// Prompt is rendered text (see Template); Messages are rendered with the
	// model's template when Prompt is empty.
	Prompt    string
	Messages  []Message
	Sampling  Sampling
	MaxTokens int
	Stop      []string // added to the template's stop strings
	// OnPlan, if set, is called before prefill with the prompt, cached and
	// to-be-evaluated token counts, so a UI can say how long reading takes.
	OnPlan func(Stats)
}

// Generate streams the completion's text to fn piece by piece, as each token
// is sampled. Cancelling ctx stops decoding within one token. An error from
// fn cancels the generation and is returned.
func (m *Model) Generate(ctx context.Context, req GenerateRequest, fn func(piece string) error) (Stats, error) {
	prompt := req.Prompt
	if prompt == "" {
		var err error
		if prompt, err = m.tmpl.Render(req.Messages); err != nil {
			return Stats{}, err
		}
	}
	var st Stats
	var sent time.Time
	firstSeen := false
	call := wire.Request{Op: "generate", Text: prompt, Sampling: req.Sampling, MaxTokens: req.MaxTokens,
		Stop: append(append([]string(nil), m.tmpl.Stops...), req.Stop...)}
	release, waited, err := m.queue.Acquire(ctx)
	st.QueueMs = ms(waited)
	if err != nil {
		return st, err
	}
	defer release()
	p, err := m.runner(ctx)
	if err != nil {
		return st, err
	}
	sent = time.Now()
	err = p.call(ctx, call, func(r wire.Reply) error {
		if r.Plan != nil && req.OnPlan != nil {
			req.OnPlan(*r.Plan)
		}
		if r.Piece != "" {
			if !firstSeen {
				firstSeen = true
				st.ClientTTFT = ms(time.Since(sent))
			}
			return fn(r.Piece)
		}
		if r.Stats != nil {
			q, c := st.QueueMs, st.ClientTTFT
			st = *r.Stats
			st.QueueMs, st.ClientTTFT = q, c
			if c > 0 {
				st.RunnerRTTMs = max(c-st.TTFTMs, 0)
			}
		}
		return nil
	})
	return st, err
}

// Warm evaluates prefix into the KV cache and keeps it there across runner
// restarts, so prompts that start with it pay only for the rest.
func (m *Model) Warm(ctx context.Context, prefix string) (Stats, error) {
	m.mu.Lock()
	m.warm = prefix
	m.mu.Unlock()
	return m.Prefill(ctx, prefix)
}

// Prefill evaluates text into the KV cache without generating.
func (m *Model) Prefill(ctx context.Context, text string) (Stats, error) {
	var st Stats
	waited, err := m.do(ctx, wire.Request{Op: "prefill", Text: text}, func(r wire.Reply) error {
		if r.Stats != nil {
			st = *r.Stats
		}
		return nil
	})
	st.QueueMs = ms(waited)
	return st, err
}

// Tokenize returns text's tokens; special parses control tokens such as
// <|im_start|>.
func (m *Model) Tokenize(ctx context.Context, text string, special bool) ([]int, error) {
	var toks []int
	_, err := m.do(ctx, wire.Request{Op: "tokenize", Text: text, Special: special}, func(r wire.Reply) error {
		toks = r.Tokens
		return nil
	})
	return toks, err
}

// Embed returns one L2-normalised vector per text (embedding models only).
func (m *Model) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	var vecs [][]float32
	_, err := m.do(ctx, wire.Request{Op: "embed", Texts: texts}, func(r wire.Reply) error {
		vecs = r.Vectors
		return nil
	})
	if err == nil && len(vecs) != len(texts) {
		err = fmt.Errorf("embed: got %d vectors for %d texts", len(vecs), len(texts))
	}
	return vecs, err
}

// Rerank scores each document's relevance to query (cross-encoder models).
func (m *Model) Rerank(ctx context.Context, query string, docs []string) ([]float32, error) {
	if m.info.PoolingType != gguf.PoolingRank {
		return nil, ErrNotReranker
	}
	var scores []float32
	_, err := m.do(ctx, wire.Request{Op: "rerank", Query: query, Texts: docs}, func(r wire.Reply) error {
		scores = r.Scores
		return nil
	})
	return scores, err
}

// ErrNotReranker is returned by Rerank on models without rank pooling.
var ErrNotReranker = errors.New("model is not a reranker")

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
