package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"

	"lore/engine"
	"lore/engine/cpu"
)

// benchWords is the vocabulary bench prompts are drawn from: plain English
// that every synthetic and real model tokenises at about a token per word.
var benchWords = strings.Fields(`the a of and to in is it that for on with as was at by be this
from or have an they which one you were her all she there would their we him been has when who will
more no if out so said what up its about into than them can only other new some could time these two
may then do first any my now such like our over man me even most made after also did many before must
through back years where much your way well down should because each just those people how too little
state good very make world still own see men work long get here between both life being under never
day same another know while last might us great old year off come since against go came right used
take three house water system city place small large light power music story river garden market
history science energy library student report question answer model memory engine paper window`)

// benchText returns about n tokens of text: the words are tokenised and the
// count adjusted until it lands within a few tokens.
func benchText(ctx context.Context, m *engine.Model, n int, seed uint64) (string, int, error) {
	rng := rand.New(rand.NewPCG(seed, 7))
	words := make([]string, 0, n)
	for len(words) < n*2 {
		words = append(words, benchWords[rng.IntN(len(benchWords))])
	}
	lo, hi := 1, len(words)
	best, bestN := "", 0
	for lo <= hi {
		mid := (lo + hi) / 2
		text := strings.Join(words[:mid], " ")
		toks, err := m.Tokenize(ctx, text, false)
		if err != nil {
			return "", 0, err
		}
		if len(toks) <= n {
			best, bestN = text, len(toks)
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	return best, bestN, nil
}

type engineBench struct {
	Model   string `json:"model"`
	Threads int    `json:"threads"`
	// CPUVariant is the runner build measured; System and WeightBuffers are
	// what llama.cpp reported (CPU features compiled in, where weights went).
	CPUVariant     string             `json:"cpu_variant"`
	System         string             `json:"system"`
	WeightBuffers  []string           `json:"weight_buffers"`
	FlashAttention string             `json:"flash_attention"`
	Seqs           int                `json:"seqs"` // sequences in the context (the app's chat models: 3)
	PrefillTokS    map[string]float64 `json:"prefill_tok_s"`
	// With --ollama: Ollama's prompt evaluation of the same texts from the
	// same file, interleaved with Lore's, and Lore's speed over it.
	OllamaPrefillTokS map[string]float64 `json:"ollama_prefill_tok_s,omitempty"`
	OllamaRatio       map[string]float64 `json:"ollama_ratio,omitempty"`
	DecodeTokS        float64            `json:"decode_tok_s"`
	TTFTColdMs        float64            `json:"ttft_cold_ms"`
	TTFTCachedMs      float64            `json:"ttft_cached_ms"`
	PromptTokens      int                `json:"prompt_tokens"`
	CachedTokens      int                `json:"cached_tokens"`
	// CacheRatio is the cached TTFT over the cold TTFT scaled by the share of
	// tokens left to evaluate: 1.0 means the cache saved all it could.
	CacheRatio float64 `json:"cache_ratio"`
	// EngineOverheadRatio is the share of client-observed TTFT spent outside
	// llama.cpp's decode and sampling calls.
	EngineOverheadRatio float64 `json:"engine_overhead_ratio"`
	Runs                int     `json:"runs"`
	Batch               int     `json:"batch"`
	// With --speculative K: decode speed on the same prompts (a passage
	// quoted twice, then 64 tokens) without and with drafts of up to K
	// tokens (prompt lookup, or the --draft model: SpecMode), never
	// switched off unless --spec-floor is set, and the share accepted.
	SpecK          int     `json:"spec_k,omitempty"`
	SpecMode       string  `json:"spec_mode,omitempty"`
	SpecFloor      float64 `json:"spec_floor,omitempty"`
	SpecOffAnswers int     `json:"spec_off_answers,omitempty"` // answers speculation sat out (below the floor)
	// With --draft: what the draft model read to catch up with each prompt
	// (median tokens and ms, inside the decode time), and the decode speed
	// without that read: what a draft whose cache already holds the prefix
	// (a follow-up, a warm system prompt) decodes at.
	DraftReadTokens int     `json:"draft_read_tokens,omitempty"`
	DraftReadMs     float64 `json:"draft_read_ms,omitempty"`
	SpecSteadyTokS  float64 `json:"spec_steady_decode_tok_s,omitempty"`
	SpecPlainTokS   float64 `json:"spec_plain_decode_tok_s,omitempty"`
	SpecDecodeTokS  float64 `json:"spec_decode_tok_s,omitempty"`
	SpecAcceptRate  float64 `json:"spec_accept_rate,omitempty"`
	SpecSameOutputs bool    `json:"spec_same_outputs,omitempty"`
}

func benchEngine(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench engine", flag.ContinueOnError)
	model := fs.String("model", "", "GGUF model `file`")
	asJSON := fs.Bool("json", false, "print one JSON object")
	threads := fs.Int("threads", 0, "threads (default: physical cores)")
	flash := fs.String("flash-attention", "off", "flash attention: on, off or auto")
	lengths := fs.String("lengths", "64,256,1024", "prompt lengths for prefill speed")
	runs := fs.Int("runs", 3, "runs per measurement (the median is reported)")
	batch := fs.Int("batch", 0, "tokens per decode call (default: the engine's)")
	spec := fs.Int("speculative", 0, "also measure decode with speculation of up to `K` drafted tokens a step")
	draft := fs.String("draft", "", "with --speculative: a draft model `file` with the same vocabulary (default: prompt lookup)")
	floor := fs.Float64("spec-floor", 0, "with --speculative: the acceptance `rate` below which speculation switches itself off (default: never)")
	variants := fs.String("variants", "", "runner `builds` to measure one after another: a comma list, or all (default: the one Lore picks)")
	seqs := fs.Int("seqs", 0, "sequences in the context (default: the app's, 3 for a chat model); 1 measures a plain single-sequence context")
	ollamaBin := fs.String("ollama", "", "also measure prefill with this `ollama` program (its own server on loopback, the same file and texts) and print Lore's speed over it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *model == "" {
		return fmt.Errorf("bench engine: --model is required (lore synth-model --shape 0.5b --out FILE makes one)")
	}
	var lens []int
	for _, s := range strings.Split(*lengths, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 8 {
			return fmt.Errorf("bench engine: bad length %q", s)
		}
		lens = append(lens, n)
	}
	runners, err := benchRunners(*variants)
	if err != nil {
		return err
	}
	opt := engine.Options{Path: *model, Threads: *threads, FlashAttention: *flash,
		NumCtx: max(slicesMax(lens), 1000) + 64 + 256, Batch: *batch, Seqs: *seqs}
	if *spec <= 0 && (*draft != "" || *floor != 0) {
		return fmt.Errorf("bench engine: --draft and --spec-floor need --speculative K")
	}
	if *spec > 0 {
		opt.Draft, opt.SpecFloor = *draft, *floor
		if *floor <= 0 {
			opt.SpecFloor = -1 // measure speculation itself: never switched off
		}
	}
	var ol *ollamaPrefill
	if *ollamaBin != "" {
		if ol, err = startOllama(ctx, *ollamaBin, *model, *flash); err != nil {
			return fmt.Errorf("bench engine: --ollama: %w", err)
		}
		defer ol.stop()
	}
	for _, r := range runners {
		opt.Runner = r
		res, err := benchModel(ctx, opt, lens, *runs, *spec, *asJSON, ol)
		if err != nil {
			return err
		}
		if *asJSON {
			if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
				return err
			}
		}
	}
	return nil
}

// benchRunners resolves --variants to runner programs ("" for the default).
func benchRunners(list string) ([]string, error) {
	if list == "" {
		return []string{""}, nil
	}
	var names []string
	if list == "all" {
		st := cpu.Describe()
		for _, v := range st.Variants {
			if v.Supported && v.Installed {
				names = append(names, v.Name)
			}
		}
	} else {
		names = strings.Split(list, ",")
	}
	var out []string
	for _, n := range names {
		r, err := cpu.FindRunner(cpu.Dirs(), cpu.Detect(), strings.TrimSpace(n))
		if err != nil {
			return nil, err
		}
		out = append(out, r.Path)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench engine: no installed runner this CPU can run")
	}
	return out, nil
}

// benchModel measures one model with one runner build.
// With ol, each prefill text is also read by Ollama, right after Lore.
func benchModel(ctx context.Context, opt engine.Options, lens []int, runs, spec int, quiet bool, ol *ollamaPrefill) (engineBench, error) {
	var res engineBench
	m, err := engine.Open(opt)
	if err != nil {
		return res, err
	}
	defer m.Close()
	if err := m.Start(ctx); err != nil {
		return res, err
	}
	ri := m.Runner()
	res = engineBench{Model: opt.Path, Threads: m.Info().Threads, CPUVariant: m.Info().CPUVariant,
		System: ri.System, WeightBuffers: ri.Buffers, FlashAttention: opt.FlashAttention, Seqs: m.Info().Seqs,
		PrefillTokS: map[string]float64{}, Runs: runs, Batch: m.Info().Batch}
	progress := func(format string, a ...any) {
		if !quiet {
			fmt.Fprintf(os.Stderr, format+"\n", a...)
		}
	}
	progress("runner %s: weights in %s", res.CPUVariant, strings.Join(res.WeightBuffers, ", "))
	seed := uint64(1)
	// gen runs one generation of prompt and returns its stats.
	gen := func(prompt string, maxTokens int) (engine.Stats, error) {
		return m.Generate(ctx, engine.GenerateRequest{Prompt: prompt, MaxTokens: maxTokens},
			func(string) error { return nil })
	}

	for _, n := range lens {
		var speeds, theirs []float64
		for range runs {
			seed++
			text, _, err := benchText(ctx, m, n, seed)
			if err != nil {
				return res, err
			}
			st, err := gen(text, 1)
			if err != nil {
				return res, err
			}
			speeds = append(speeds, float64(st.EvalTokens)/(st.PrefillMs/1000))
			if ol != nil {
				_, tokS, err := ol.prefill(ctx, text, res.Threads, opt.NumCtx)
				if err != nil {
					return res, err
				}
				theirs = append(theirs, tokS)
			}
		}
		key := strconv.Itoa(n)
		res.PrefillTokS[key] = round1(median(speeds))
		if ol == nil {
			progress("prefill %5d tokens: %.1f tok/s", n, median(speeds))
			continue
		}
		if res.OllamaPrefillTokS == nil {
			res.OllamaPrefillTokS, res.OllamaRatio = map[string]float64{}, map[string]float64{}
		}
		res.OllamaPrefillTokS[key], res.OllamaRatio[key] = round1(median(theirs)), round3(median(speeds)/median(theirs))
		progress("prefill %5d tokens: %.1f tok/s; Ollama %.1f tok/s on the same texts: Lore %.2f× (target ≥ 1.2×)",
			n, median(speeds), median(theirs), res.OllamaRatio[key])
	}

	// Decode speed: a short prompt, 64 tokens generated.
	var decode []float64
	for range runs {
		seed++
		text, _, err := benchText(ctx, m, 32, seed)
		if err != nil {
			return res, err
		}
		st, err := gen(text, 64)
		if err != nil {
			return res, err
		}
		if st.DecodeTokens > 1 {
			decode = append(decode, st.DecodeTokS)
		}
	}
	res.DecodeTokS = round1(median(decode))
	progress("decode: %.1f tok/s", res.DecodeTokS)

	if spec > 0 {
		var plain, fast, steady, readMs, readToks []float64
		drafted, accepted := 0, 0
		res.SpecK, res.SpecSameOutputs = spec, true
		for range runs {
			seed++
			text, _, err := benchText(ctx, m, 150, seed)
			if err != nil {
				return res, err
			}
			prompt := text + "\n\n" + text + "\n\n" + text
			var outs [2]strings.Builder
			for i, k := range []int{0, spec} {
				m.ClearSeq(ctx, engine.SeqAnswer)
				st, err := m.Generate(ctx, engine.GenerateRequest{Prompt: prompt, MaxTokens: 64, Speculate: k},
					func(p string) error { outs[i].WriteString(p); return nil })
				if err != nil {
					return res, err
				}
				if k == 0 {
					plain = append(plain, st.DecodeTokS)
				} else {
					fast = append(fast, st.DecodeTokS)
					if st.DraftReadMs > 0 && st.DecodeMs > st.DraftReadMs {
						steady = append(steady, float64(st.DecodeTokens)/((st.DecodeMs-st.DraftReadMs)/1000))
						readMs, readToks = append(readMs, st.DraftReadMs), append(readToks, float64(st.DraftReadTokens))
					}
					drafted, accepted = drafted+st.Drafted, accepted+st.Accepted
					res.SpecMode = cmp.Or(st.SpecMode, res.SpecMode)
					if strings.HasPrefix(st.SpecNote, "off:") {
						res.SpecOffAnswers++
					}
				}
			}
			res.SpecSameOutputs = res.SpecSameOutputs && outs[0].String() == outs[1].String()
		}
		res.SpecPlainTokS, res.SpecDecodeTokS = round1(median(plain)), round1(median(fast))
		if drafted > 0 {
			res.SpecAcceptRate = round1(100*float64(accepted)/float64(drafted)) / 100
		}
		if opt.SpecFloor > 0 {
			res.SpecFloor = opt.SpecFloor
		}
		if len(steady) > 0 {
			res.SpecSteadyTokS, res.DraftReadMs, res.DraftReadTokens = round1(median(steady)), round1(median(readMs)), int(median(readToks))
			progress("draft model: read %d tokens in %.0f ms to catch up with each prompt (median); without that read %.1f tok/s",
				res.DraftReadTokens, res.DraftReadMs, res.SpecSteadyTokS)
		}
		progress("decode, passage quoted: %.1f tok/s plain, %.1f tok/s with up to %d drafted by %s (%.0f%% of %d accepted; off for %d of %d answers); same output: %v",
			res.SpecPlainTokS, res.SpecDecodeTokS, spec, res.SpecMode, 100*res.SpecAcceptRate, drafted, res.SpecOffAnswers, runs, res.SpecSameOutputs)
	}

	// TTFT at 1,000 prompt tokens: cold, then with a 300-token prefix cached.
	var cold, cached, overhead []float64
	for range runs {
		seed++
		system, _, err := benchText(ctx, m, 300, seed)
		if err != nil {
			return res, err
		}
		seed++
		rest, _, err := benchText(ctx, m, 700, seed)
		if err != nil {
			return res, err
		}
		prompt := system + " " + rest
		// Cold: something else in the cache first.
		if _, err := m.Prefill(ctx, "reset "+rest); err != nil {
			return res, err
		}
		st, err := gen(prompt, 1)
		if err != nil {
			return res, err
		}
		cold = append(cold, st.ClientTTFT)
		overhead = append(overhead, (st.ClientTTFT-st.LlamaMs)/st.ClientTTFT)
		res.PromptTokens = st.PromptTokens
		// Cached: the system part is already evaluated.
		if _, err := m.Prefill(ctx, system); err != nil {
			return res, err
		}
		seed++
		other, _, err := benchText(ctx, m, 700, seed)
		if err != nil {
			return res, err
		}
		st, err = gen(system+" "+other, 1)
		if err != nil {
			return res, err
		}
		cached = append(cached, st.ClientTTFT)
		overhead = append(overhead, (st.ClientTTFT-st.LlamaMs)/st.ClientTTFT)
		res.CachedTokens = st.CachedTokens
	}
	res.TTFTColdMs, res.TTFTCachedMs = round1(median(cold)), round1(median(cached))
	if res.PromptTokens > 0 {
		share := float64(res.PromptTokens-res.CachedTokens) / float64(res.PromptTokens)
		res.CacheRatio = round3(res.TTFTCachedMs / (res.TTFTColdMs * share))
	}
	res.EngineOverheadRatio = round3(median(overhead))
	progress("ttft 1000 tokens: cold %.0f ms, 300 cached %.0f ms (ratio %.3f, target ≤ 1.05)",
		res.TTFTColdMs, res.TTFTCachedMs, res.CacheRatio)
	progress("engine overhead: %.2f%% of TTFT (target < 2%%)", 100*res.EngineOverheadRatio)
	return res, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func slicesMax(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func round1(x float64) float64 { return float64(int64(x*10+0.5)) / 10 }
func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }
