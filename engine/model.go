// Package engine runs GGUF models on the device. Each Model is a llama.cpp
// runner in a supervised child process (the same binary, re-executed), so a
// crash inside llama.cpp costs one request, not the app. The engine keeps the
// longest common prefix of consecutive prompts in the KV cache and queues
// concurrent callers.
//
// A chat model's context holds several sequences (SeqAnswer,
// SeqSpeculative, SeqScratch) in one unified KV cache. A prompt reuses the
// longest prefix any of them holds, so text prefetched into the speculative
// sequence while the user types (Prefetch) is adopted by the answer. KV
// states can be saved and restored (SaveState, LoadState), and with a
// kv.Store a warm prefix is restored from disk instead of evaluated again.
package engine

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"lore/engine/cpu"
	"lore/engine/gguf"
	"lore/engine/kv"
	"lore/engine/wire"
)

// The sequences of a chat model's context (Options.Seqs ≥ 3).
const (
	// SeqAnswer is where Generate, Prefill and Warm work.
	SeqAnswer = 0
	// SeqSpeculative is where Prefetch evaluates a draft prompt.
	SeqSpeculative = 1
	// SeqScratch is free for the caller (LoadState a saved prompt there,
	// say: the next Generate adopts it).
	SeqScratch = 2
)

// State is one sequence's saved KV: the tokens it holds and llama.cpp's
// bytes for them.
type State = kv.Entry

// Stats and Sampling are the wire protocol's types, part of the engine's API.
type (
	Stats    = wire.Stats
	Sampling = wire.Sampling
	// Progress is how far a Prefetch has read (see WithProgress).
	Progress = wire.Progress
)

// Options configures a Model. Zero values take defaults.
type Options struct {
	Path   string // GGUF file
	NumCtx int    // tokens one sequence holds (default 4096, capped by the model's)
	// Batch is the tokens per decode call: by default 256 for chat models
	// on the CPU, where smaller calls do less masked attention work
	// (docs/performance.md), and 512 on a GPU (not measured) and for
	// embedding models, whose texts must each fit one call.
	Batch     int
	Threads   int // default: physical cores
	GPULayers int
	// FlashAttention is "auto", "on" or "off" (default "off": CPU prefill
	// measured 1.27x faster at 1,024 tokens and 1.63x at 3,000: docs/performance.md).
	FlashAttention string
	// QueueCapacity bounds waiting callers; beyond it calls fail with ErrBusy
	// (default 64, negative means unbounded).
	QueueCapacity int
	// Runner is the runner program (default: the best lore-runner-<variant>
	// for this CPU, see engine/cpu).
	Runner string

	// Seqs is the number of sequences in the context (default 3 for chat
	// models: SeqAnswer, SeqSpeculative, SeqScratch; 1 for embedding
	// models). With more than one the KV cache is unified: all sequences
	// share KVCells cells, so any one can hold a full NumCtx prompt, and a
	// prefix copied between sequences shares its cells instead of being
	// duplicated. When a prompt finds the cache full, sequences other than
	// the answer are cleared to make room (Stats.Evicted).
	Seqs int
	// KVCells is the size of that shared cache (default NumCtx: the memory
	// of one sequence; more lets a long speculative prompt coexist with a
	// long conversation without evictions).
	KVCells int
	// MicroBatch is the tokens per decode call of a Prefetch (default 32):
	// a preempted Prefetch loses at most the micro-batch in flight.
	MicroBatch int
	// KV, if set, keeps warm prefixes' KV states (see Warm) in RAM and on
	// disk, so a restarted runner or app restores them in milliseconds.
	KV *kv.Store
	// KeepBytes is the memory the runner may hold the states of answered
	// prompts in (GenerateRequest.KeepAs), least recently used out first;
	// 0 keeps none. Models with a sliding window or a recurrent state keep
	// none either way.
	KeepBytes int64
	// SpecFloor is the acceptance rate below which GenerateRequest.Speculate
	// switches itself off for a while (default DefaultSpecFloor; negative:
	// never).
	SpecFloor float64
	// Draft, if set, is a GGUF model with the same vocabulary whose greedy
	// picks are the drafts of GenerateRequest.Speculate (without it, prompt
	// lookup drafts). It must have the model's token list, give or take
	// VocabSlack padding tokens at the end (a smaller model of the same
	// family usually has): any other is refused (ErrVocabMismatch), and a
	// draft llama.cpp cannot load leaves prompt lookup in its place (logged
	// by the runner).
	Draft string
}

// Info describes a loaded model.
type Info struct {
	gguf.Info
	Path     string `json:"path"`
	Template string `json:"template"`
	NumCtx   int    `json:"num_ctx"`
	Threads  int    `json:"threads"`
	Seqs     int    `json:"seqs"`  // sequences in the context
	Batch    int    `json:"batch"` // tokens per decode call
	// GPULayers and FlashAttention are as opened (Options).
	GPULayers      int    `json:"gpu_layers"`
	FlashAttention string `json:"flash_attention"`
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

	mu       sync.Mutex // guards the fields below
	proc     *process
	warm     string // prompt prefix to restore after a restart
	warmSt   Stats  // what the last warm-up cost
	loaded   RunnerInfo
	closed   bool
	prefetch context.CancelCauseFunc // cancels the running Prefetch
	prefGen  uint64                  // counts Prefetch calls
	// tokenCache remembers tokenizations of passages and prefixes
	// (stitch.go).
	tokenCache map[string][]int

	spec speculation

	// stateInline moves KV states inline in the protocol (base64 in the
	// JSON line) instead of through a temporary file: ten times slower at
	// 10 MB (TestMeasure), kept for that comparison.
	stateInline bool
}

// Open validates the file's GGUF header and prepares a model. The runner
// starts on first use (or Start).
func Open(opt Options) (*Model, error) {
	f, err := gguf.Open(opt.Path)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", opt.Path, err)
	}
	gi := f.Info()
	if opt.Draft != "" {
		if err := checkDraft(f, opt.Draft); err != nil {
			return nil, err
		}
	}
	if opt.Batch <= 0 {
		opt.Batch = 256
		if gi.PoolingType > gguf.PoolingNone || opt.GPULayers > 0 {
			opt.Batch = 512
		}
	}
	if opt.Seqs <= 0 {
		opt.Seqs = 1
		if gi.PoolingType <= gguf.PoolingNone {
			opt.Seqs = SeqScratch + 1
		}
	}
	if opt.MicroBatch <= 0 {
		opt.MicroBatch = 32
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
	if opt.KVCells < opt.NumCtx {
		opt.KVCells = opt.NumCtx
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
			NumCtx: opt.NumCtx, Threads: opt.Threads, Seqs: opt.Seqs, Batch: opt.Batch,
			GPULayers: opt.GPULayers, FlashAttention: opt.FlashAttention, CPUVariant: variant},
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

// QueueStats reports the model's queue: callers waiting, and whether one
// holds it now.
func (m *Model) QueueStats() QueueStats { return m.queue.Stats() }

// Reserve keeps background work (reading ahead, saving passage KV) off the
// model until release, preempting what runs, for work of ctx's priority
// that is about to come (see Queue.Reserve).
func (m *Model) Reserve(ctx context.Context) (release func()) { return m.queue.Reserve(ctx) }

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
	p, fresh, err := m.start(ctx)
	if err != nil || !fresh {
		return p, err
	}
	m.mu.Lock()
	warm := m.warm
	m.mu.Unlock()
	if warm != "" {
		st, err := m.warmUp(ctx, p, warm)
		if err != nil {
			return nil, fmt.Errorf("warm prefix: %w", err)
		}
		m.mu.Lock()
		m.warmSt = st
		m.mu.Unlock()
	}
	return p, nil
}

// start returns a live runner with the model loaded, and whether it was
// started now.
func (m *Model) start(ctx context.Context) (*process, bool, error) {
	m.mu.Lock()
	p, closed := m.proc, m.closed
	m.mu.Unlock()
	switch {
	case closed:
		return nil, false, ErrClosed
	case p != nil && p.alive():
		return p, false, nil
	}
	// The file is checked again before every (re)load: it may have been
	// replaced since Open, and llama.cpp must never see an unchecked file.
	f, err := gguf.Open(m.opt.Path)
	if err != nil {
		return nil, false, fmt.Errorf("model %s: %w", m.opt.Path, err)
	}
	if m.opt.Draft != "" {
		if err := checkDraft(f, m.opt.Draft); err != nil {
			return nil, false, err
		}
	}
	p, err = startProcess(m.opt.Runner, m.noteLog)
	if err != nil {
		return nil, false, err
	}
	load := &wire.LoadParams{Path: m.opt.Path, NumCtx: m.opt.NumCtx, KVCells: m.opt.KVCells, Batch: m.opt.Batch,
		Seqs: m.opt.Seqs, Threads: m.opt.Threads, GPULayers: m.opt.GPULayers, FlashAttention: m.opt.FlashAttention,
		Pooling: max(int(m.info.PoolingType), 0), Draft: m.opt.Draft, KeepBytes: m.opt.KeepBytes}
	err = p.call(ctx, wire.Request{Op: "load", Load: load}, func(wire.Reply) error { return nil })
	if err != nil {
		p.close()
		return nil, false, fmt.Errorf("load %s: %w", filepath.Base(m.opt.Path), err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		p.close()
		return nil, false, ErrClosed
	}
	m.proc = p
	return p, true, nil
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
	// TrimSpeculative cuts the speculative sequence back to the prefix it
	// shares with the prompt before the prompt is evaluated. Set it when
	// this is the question the last Prefetch was for: on a miss the draft
	// is stale, and in the unified cache its cells slow this prefill (an
	// 816-token prefill took 2.2 times as long beside 1,200 stale cells,
	// TestMeasure). Leave it unset for a question from someone else, whose
	// prefetch (perhaps cut short by this very question) is still to come.
	TrimSpeculative bool
	// Parts, when set, are the prompt in pieces (Prompt is ignored); with
	// Stitch and Options.KV, passage parts whose KV CachePassage saved are
	// placed instead of evaluated (Stats.StitchedPassages and the rest).
	Parts  []Part
	Stitch *Stitch
	// Speculate drafts up to that many tokens per step (with Options.Draft,
	// else by prompt lookup) and verifies them in one batch (greedy sampling
	// only; the output is unchanged up to batch-size-dependent numerics).
	// Stats.Drafted, Stats.Accepted and Stats.SpecNote say how it went.
	Speculate int
	// SpecFloor, if set, overrides Options.SpecFloor for this answer.
	SpecFloor float64
	// Inspect, if set, receives the first sampled token's logits and the
	// sampled tokens when generation ends (fidelity checks).
	Inspect func(firstLogits []float32, tokens []int)
	// KeepAs keeps the answer sequence's state (prompt and answer) in the
	// runner's memory under this name once the answer is sent
	// (Options.KeepBytes; Stats.Kept names the states kept then). Restore
	// names such a state, an earlier prompt that starts as this one does:
	// it is placed in the answer sequence first when it holds more of the
	// prompt than any sequence does (Stats.Restored, RestoreMs;
	// RestoreSkipped says why not), and reused like any cached prefix, as
	// far as its tokens agree with the prompt's.
	KeepAs, Restore string
}

// Generate streams the completion's text to fn piece by piece, as each token
// is sampled. The prompt reuses the longest prefix any sequence holds
// (Stats.CachedTokens; AdoptedSeq and AdoptedTokens when it came from
// another sequence, such as a Prefetch). Cancelling ctx stops prefill or
// decoding within about a millisecond (llama.cpp's abort callback). An
// error from fn cancels the generation and is returned.
func (m *Model) Generate(ctx context.Context, req GenerateRequest, fn func(piece string) error) (Stats, error) {
	prompt := req.Prompt
	if req.Parts != nil {
		var b strings.Builder
		for _, p := range req.Parts {
			b.WriteString(p.Text)
		}
		prompt = b.String()
	}
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
		Stop: append(append([]string(nil), m.tmpl.Stops...), req.Stop...), KeepAs: req.KeepAs, Restore: req.Restore}
	if req.TrimSpeculative && m.opt.Seqs > SeqSpeculative {
		call.Trim = []int{SeqSpeculative}
	}
	call.Logits = req.Inspect != nil
	release, waited, err := m.queue.Acquire(ctx)
	st.QueueMs = ms(waited)
	if err != nil {
		return st, err
	}
	defer release()
	var specNote string
	if req.Sampling.Temperature <= 0 && req.Speculate > 0 {
		call.Speculate, specNote = m.spec.allow(req.Speculate) // an answer that runs counts towards the backoff
	}
	p, err := m.runner(ctx)
	if err != nil {
		return st, err
	}
	var stitchMs float64
	if req.Stitch != nil && req.Parts != nil && m.opt.KV != nil {
		t := time.Now()
		segs, files, misses, err := m.segments(ctx, p, req.Parts, *req.Stitch)
		for _, f := range files {
			defer os.Remove(f)
		}
		if err != nil {
			return st, fmt.Errorf("stitch: %w", err)
		}
		call.Segments, call.Repair, call.Scratch = segs, max(req.Stitch.Repair, 0), SeqScratch
		st.UncachedPassages, stitchMs = misses, ms(time.Since(t))
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
			q, c, u := st.QueueMs, st.ClientTTFT, st.UncachedPassages
			st = *r.Stats
			st.QueueMs, st.ClientTTFT, st.UncachedPassages = q, c, u
			st.StitchMs += stitchMs
			if c > 0 {
				st.RunnerRTTMs = max(c-st.TTFTMs, 0)
			}
		}
		if r.Done && req.Inspect != nil {
			req.Inspect(r.Logits, r.Tokens)
		}
		return nil
	})
	st.SpecNote, st.SpecAcceptRate = specNote, -1
	if call.Speculate > 0 {
		floor := cmp.Or(req.SpecFloor, m.opt.SpecFloor, DefaultSpecFloor)
		st.SpecAcceptRate = m.spec.record(st.Drafted, st.Accepted, floor)
		switch {
		case st.SpecAcceptRate >= 0 && st.SpecAcceptRate < floor:
			st.SpecNote = fmt.Sprintf("switched off: %.0f%% of drafted tokens accepted, floor %.0f%%", 100*st.SpecAcceptRate, 100*floor)
		default:
			st.SpecNote = fmt.Sprintf("on: %s, up to %d drafted tokens a step", cmp.Or(st.SpecMode, "prompt lookup"), call.Speculate)
		}
	}
	return st, err
}

// Warm puts prefix into the answer sequence's KV cache and keeps it there
// across runner restarts, so prompts that start with it pay only for the
// rest. With Options.KV the prefix's state is restored from the store when
// it is there (Stats.Restored, Stats.RestoreMs: milliseconds) and saved to
// it after a prefill otherwise; a restarted runner is re-warmed the same way
// (see WarmStats). A prefix already in the cache costs nothing.
func (m *Model) Warm(ctx context.Context, prefix string) (Stats, error) {
	m.mu.Lock()
	m.warm = prefix
	m.mu.Unlock()
	release, waited, err := m.queue.Acquire(ctx)
	if err != nil {
		return Stats{QueueMs: ms(waited)}, err
	}
	defer release()
	p, _, err := m.start(ctx)
	if err != nil {
		return Stats{QueueMs: ms(waited)}, err
	}
	st, err := m.warmUp(ctx, p, prefix)
	st.QueueMs = ms(waited)
	if err == nil || st.PromptTokens > 0 {
		m.mu.Lock()
		m.warmSt = st
		m.mu.Unlock()
	}
	return st, err
}

// WarmStats reports the last warm-up: Warm's, or the automatic one after a
// runner restart (Restored and RestoreMs say whether it came from the
// store and how long it took).
func (m *Model) WarmStats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.warmSt
}

// warmUp brings prefix into the answer sequence: from the cache if some
// sequence holds it, else from the store, else by a prefill whose state it
// then saves. A state the runner rejects is deleted from the store and
// rebuilt.
func (m *Model) warmUp(ctx context.Context, p *process, prefix string) (Stats, error) {
	if m.opt.KV == nil {
		return m.prefillOn(ctx, p, SeqAnswer, prefix)
	}
	start := time.Now()
	var probe wire.Reply
	err := p.call(ctx, wire.Request{Op: "probe", Seq: SeqAnswer, Text: prefix}, func(r wire.Reply) error {
		probe = r
		return nil
	})
	if err != nil {
		return Stats{}, err
	}
	toks := probe.Tokens
	if probe.Stats == nil || len(toks) == 0 || probe.Stats.CachedTokens == len(toks) {
		return m.prefillOn(ctx, p, SeqAnswer, prefix)
	}
	key, err := m.StateKey(toks)
	if err != nil {
		return Stats{}, err
	}
	if e, ok := m.opt.KV.Get(key); ok {
		st, err := m.loadState(ctx, p, SeqAnswer, e)
		if err == nil {
			st.RestoreMs = ms(time.Since(start)) // lookup, transfer and llama.cpp
			return st, nil
		}
		m.opt.KV.Delete(key)
		if errors.Is(err, ErrRunnerDied) || ctx.Err() != nil {
			return Stats{}, err
		}
	}
	st, err := m.prefillOn(ctx, p, SeqAnswer, prefix)
	if err != nil {
		return st, err
	}
	e, sst, err := m.saveState(ctx, p, SeqAnswer)
	st.SaveMs, st.StateBytes = sst.SaveMs, sst.StateBytes
	if err == nil && !slices.Equal(e.Tokens, toks) {
		err = fmt.Errorf("the answer sequence holds %d tokens, not the prefix's %d", len(e.Tokens), len(toks))
	}
	if err == nil {
		err = m.opt.KV.Put(key, e)
	}
	if err != nil {
		return st, fmt.Errorf("warm: prefix evaluated, state not saved: %w", err)
	}
	return st, nil
}

// StateKey is the kv.Store key of a state holding toks in this model's
// context: the model file as it is now (name, size, modification time),
// the settings that shape the state's bytes and the tokens.
func (m *Model) StateKey(toks []int) (kv.Key, error) {
	fi, err := os.Stat(m.opt.Path)
	if err != nil {
		return kv.Key{}, err
	}
	o := m.opt
	return kv.Key{
		Model: fmt.Sprintf("%s|%d|%d", filepath.Base(o.Path), fi.Size(), fi.ModTime().UnixNano()),
		Context: fmt.Sprintf("llama.cpp %s; num_ctx %d; kv_cells %d; batch %d; seqs %d; flash_attention %s; gpu_layers %d; runner %s",
			llamaVersion(), o.NumCtx, o.KVCells, o.Batch, o.Seqs, o.FlashAttention, o.GPULayers, m.info.CPUVariant),
		Tokens: kv.HashTokens(toks),
	}, nil
}

// llamaVersion is the version of the module that carries llama.cpp: a
// state's layout may change with it.
func llamaVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/ollama/ollama" {
				return d.Version
			}
		}
	}
	return "unknown"
}

// Prefill evaluates text into the answer sequence without generating.
func (m *Model) Prefill(ctx context.Context, text string) (Stats, error) {
	var st Stats
	release, waited, err := m.queue.Acquire(ctx)
	if err != nil {
		return Stats{QueueMs: ms(waited)}, err
	}
	defer release()
	p, err := m.runner(ctx)
	if err == nil {
		st, err = m.prefillOn(ctx, p, SeqAnswer, text)
	}
	st.QueueMs = ms(waited)
	return st, err
}

func (m *Model) prefillOn(ctx context.Context, p *process, seq int, text string) (Stats, error) {
	var st Stats
	err := p.call(ctx, wire.Request{Op: "prefill", Seq: seq, Text: text}, func(r wire.Reply) error {
		if r.Stats != nil {
			st = *r.Stats
		}
		return nil
	})
	return st, err
}

// ErrSuperseded is the error of a Prefetch that a newer one replaced.
var ErrSuperseded = errors.New("prefetch superseded by a newer one")

// ErrNoSpeculative is returned by Prefetch on a model loaded with fewer
// than two sequences.
var ErrNoSpeculative = errors.New("model has no speculative sequence (Options.Seqs < 2)")

// Prefetch evaluates text (a prompt up to, not including, the question)
// into the speculative sequence at Background priority, so that a Generate
// whose prompt starts with it adopts the work (Stats.AdoptedSeq,
// AdoptedTokens). It runs in micro-batches (Options.MicroBatch) and gives
// way to any interactive call: that call waits about one micro-batch, and
// Prefetch returns ErrPreempted, keeping the tokens already evaluated (the
// partial prefix still counts). A newer Prefetch cancels an older one,
// which returns ErrSuperseded. Text the cache already holds costs nothing.
// The returned Stats say what was evaluated either way. marks are byte
// offsets in text (in order) that the Progress reports count.
func (m *Model) Prefetch(ctx context.Context, text string, marks ...int) (Stats, error) {
	if m.opt.Seqs <= SeqSpeculative {
		return Stats{}, ErrNoSpeculative
	}
	ctx = WithPriority(ctx, Background)
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	m.mu.Lock()
	if m.prefetch != nil {
		m.prefetch(ErrSuperseded)
	}
	m.prefGen++
	gen := m.prefGen
	m.prefetch = cancel
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		if m.prefGen == gen {
			m.prefetch = nil
		}
		m.mu.Unlock()
	}()

	var st Stats
	hold, release, waited, err := m.queue.AcquirePreemptible(sctx)
	st.QueueMs = ms(waited)
	if err != nil {
		return st, stopped(sctx, &st, err)
	}
	defer release()
	// Starting the runner is not abandoned when superseded: the next
	// Prefetch needs it as much.
	p, err := m.runner(ctx)
	if err != nil {
		return st, err
	}
	if hold.Err() != nil {
		return st, stopped(hold, &st, hold.Err())
	}
	progress, _ := ctx.Value(progressKey{}).(func(Progress))
	err = p.call(hold, wire.Request{Op: "prefill", Seq: SeqSpeculative, Text: text, Batch: m.opt.MicroBatch, Marks: marks},
		func(r wire.Reply) error {
			if r.Progress != nil && progress != nil {
				progress(*r.Progress)
			}
			if r.Stats != nil {
				q := st.QueueMs
				st = *r.Stats
				st.QueueMs = q
			}
			return nil
		})
	if err != nil && hold.Err() != nil {
		return st, stopped(hold, &st, err)
	}
	return st, err
}

type progressKey struct{}

// WithProgress has a Prefetch under ctx call fn after each micro-batch
// with what the runner says the speculative sequence holds: its tokens of
// the prompt's total and how many of the marks its text reaches. That is
// what a question arriving meanwhile can adopt, measured.
func WithProgress(ctx context.Context, fn func(Progress)) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// stopped turns the error of a call whose context ended into the reason:
// ErrPreempted, ErrSuperseded or the caller's own cancellation.
func stopped(ctx context.Context, st *Stats, err error) error {
	cause := context.Cause(ctx)
	if cause == nil {
		return err
	}
	switch {
	case errors.Is(cause, ErrPreempted):
		st.StopReason = "preempted"
	case errors.Is(cause, ErrSuperseded):
		st.StopReason = "superseded"
	default:
		st.StopReason = "cancel"
	}
	return cause
}

// SaveState returns the KV state of sequence seq and the tokens it holds,
// for LoadState (now, or after a restart through a kv.Store).
func (m *Model) SaveState(ctx context.Context, seq int) (State, Stats, error) {
	release, waited, err := m.queue.Acquire(ctx)
	if err != nil {
		return State{}, Stats{QueueMs: ms(waited)}, err
	}
	defer release()
	p, err := m.runner(ctx)
	if err != nil {
		return State{}, Stats{QueueMs: ms(waited)}, err
	}
	e, st, err := m.saveState(ctx, p, seq)
	st.QueueMs = ms(waited)
	return e, st, err
}

// LoadState replaces sequence seq's KV with s, a state SaveState returned
// for this model with the same Options (llama.cpp checks only part of it:
// never pass bytes of unknown origin; kv.Store checks what it returns).
func (m *Model) LoadState(ctx context.Context, seq int, s State) (Stats, error) {
	release, waited, err := m.queue.Acquire(ctx)
	if err != nil {
		return Stats{QueueMs: ms(waited)}, err
	}
	defer release()
	p, err := m.runner(ctx)
	if err != nil {
		return Stats{QueueMs: ms(waited)}, err
	}
	st, err := m.loadState(ctx, p, seq, s)
	st.QueueMs = ms(waited)
	return st, err
}

func (m *Model) saveState(ctx context.Context, p *process, seq int) (State, Stats, error) {
	start := time.Now()
	req := wire.Request{Op: "state_save", Seq: seq}
	if !m.stateInline {
		f, err := os.CreateTemp("", "lore-kv-*.state")
		if err != nil {
			return State{}, Stats{}, err
		}
		f.Close()
		defer os.Remove(f.Name())
		req.Path = f.Name()
	}
	var e State
	var st Stats
	err := p.call(ctx, req, func(r wire.Reply) error {
		e = State{Tokens: r.Tokens, Data: r.State}
		if r.Stats != nil {
			st = *r.Stats
		}
		return nil
	})
	if err == nil && !m.stateInline {
		e.Data, err = os.ReadFile(req.Path)
	}
	if err != nil {
		return State{}, st, fmt.Errorf("save state of sequence %d: %w", seq, err)
	}
	st.SaveMs = ms(time.Since(start))
	return e, st, nil
}

func (m *Model) loadState(ctx context.Context, p *process, seq int, e State) (Stats, error) {
	start := time.Now()
	req := wire.Request{Op: "state_load", Seq: seq, Tokens: e.Tokens}
	if !m.stateInline {
		f, err := os.CreateTemp("", "lore-kv-*.state")
		if err != nil {
			return Stats{}, err
		}
		_, err = f.Write(e.Data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		defer os.Remove(f.Name())
		if err != nil {
			return Stats{}, err
		}
		req.Path = f.Name()
	} else {
		req.State = e.Data
	}
	var st Stats
	err := p.call(ctx, req, func(r wire.Reply) error {
		if r.Stats != nil {
			st = *r.Stats
		}
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("load state into sequence %d: %w", seq, err)
	}
	st.RestoreMs = ms(time.Since(start))
	return st, nil
}

// ClearSeq empties sequence seq.
func (m *Model) ClearSeq(ctx context.Context, seq int) error { return m.TrimSeq(ctx, seq, 0) }

// TrimSeq drops all but the first keep tokens of sequence seq. In the
// unified cache every cell in use costs attention work for every prompt,
// whichever sequence holds it: a prefill of 816 tokens took 1.8 times the
// CPU time with 1,200 cells of other sequences' text in the cache
// (TestMeasure). So when a Prefetch starts on new passages, trimming the
// answer sequence to the part it shares with the draft (the system
// prefix, say) makes the Prefetch faster, at the cost of the answer's
// tail, which only a follow-up on the same passages would reuse.
func (m *Model) TrimSeq(ctx context.Context, seq, keep int) error {
	_, err := m.do(ctx, wire.Request{Op: "seq_trim", Seq: seq, Keep: keep}, func(wire.Reply) error { return nil })
	return err
}

// SeqTokens returns the number of tokens each sequence holds.
func (m *Model) SeqTokens(ctx context.Context) ([]int, error) {
	var n []int
	_, err := m.do(ctx, wire.Request{Op: "seqs"}, func(r wire.Reply) error {
		n = r.SeqTokens
		return nil
	})
	return n, err
}

// CountTokens is how many tokens text is in the model's vocabulary (no
// special tokens parsed).
func (m *Model) CountTokens(ctx context.Context, text string) (int, error) {
	toks, err := m.Tokenize(ctx, text, false)
	return len(toks), err
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
