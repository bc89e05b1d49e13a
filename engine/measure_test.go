package engine_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"lore/engine"
	"lore/engine/kv"
)

// TestMeasure prints the costs behind the engine's choices, on the model
// in LORE_MEASURE (e.g. the 0.5b synthetic model: `lore synth-model
// --shape 0.5b --out /tmp/m05.gguf`). It asserts nothing; run it alone:
//
//	LORE_MEASURE=/tmp/m05.gguf go test -run TestMeasure -v ./engine/
//
// Times are wall-clock medians (and minima: on a shared machine the
// minimum is the better estimate of the cost); prefill comparisons also
// give the runner's CPU time, which other load disturbs less with
// LORE_MEASURE_THREADS=1 (with two threads, one spins while the other is
// descheduled). LORE_MEASURE_RUNS sets the repetitions (default 5),
// LORE_MEASURE_ONLY picks the prefill cases whose name contains it.
func TestMeasure(t *testing.T) {
	path := os.Getenv("LORE_MEASURE")
	if path == "" {
		t.Skip("LORE_MEASURE is not set")
	}
	runs := 5
	if n, err := strconv.Atoi(os.Getenv("LORE_MEASURE_RUNS")); err == nil {
		runs = n
	}
	ctx := context.Background()
	threads, _ := strconv.Atoi(os.Getenv("LORE_MEASURE_THREADS"))
	open := func(opt engine.Options) *engine.Model {
		opt.Path, opt.NumCtx, opt.Threads = path, 4096, threads
		return openWith(t, opt)
	}
	m := open(engine.Options{})
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Prefixes of about 100 and 800 tokens.
	prefixes := map[int]string{}
	for _, want := range []int{100, 800} {
		for n := 1; ; n++ {
			p, err := m.Template().Prefix("You answer from the library.\n" + passages(n))
			if err != nil {
				t.Fatal(err)
			}
			toks, err := m.Tokenize(ctx, p, true)
			if err != nil {
				t.Fatal(err)
			}
			if len(toks) >= want {
				prefixes[want] = p
				break
			}
		}
	}
	clearAll := func(m *engine.Model) {
		for seq := range 3 {
			m.ClearSeq(ctx, seq)
		}
	}

	t.Run("restore", func(t *testing.T) {
		// Restore vs prefill of a system prefix; state transfer through a
		// file vs inline (base64 in the JSON line).
		for _, size := range []int{100, 800} {
			prefix := prefixes[size]
			var prefill, save, inline, file, warm []float64
			var st engine.Stats
			var state engine.State
			dir := t.TempDir()
			for range runs {
				clearAll(m)
				ps, err := m.Prefill(ctx, prefix)
				if err != nil {
					t.Fatal(err)
				}
				prefill, st = append(prefill, ps.PrefillMs), ps
				s, ss, err := m.SaveState(ctx, engine.SeqAnswer)
				if err != nil {
					t.Fatal(err)
				}
				save, state = append(save, ss.SaveMs), s
				for _, viaInline := range []bool{false, true} {
					engine.SetStateInline(m, viaInline)
					clearAll(m)
					ls, err := m.LoadState(ctx, engine.SeqAnswer, s)
					if err != nil {
						t.Fatal(err)
					}
					if viaInline {
						inline = append(inline, ls.RestoreMs)
					} else {
						file = append(file, ls.RestoreMs)
					}
				}
				engine.SetStateInline(m, false)
				// Warm from a store opened afresh (a restarted app): disk
				// read, checksum, transfer, llama.cpp.
				store, err := kv.Open(kv.Options{Dir: dir})
				if err != nil {
					t.Fatal(err)
				}
				wm := open(engine.Options{KV: store})
				if err := wm.Start(ctx); err != nil {
					t.Fatal(err)
				}
				ws, err := wm.Warm(ctx, prefix)
				if err != nil {
					t.Fatal(err)
				}
				if ws.Restored {
					warm = append(warm, ws.RestoreMs)
				}
				wm.Close()
			}
			t.Logf("prefix of %d tokens (state %.1f MB): prefill %s ms; save %s ms; restore via file %s ms, inline %s ms; Warm from a fresh disk store %s ms",
				st.PromptTokens, float64(len(state.Data))/1e6, med(prefill), med(save), med(file), med(inline), med(warm))
		}
	})

	t.Run("stitch", func(t *testing.T) {
		// Five saved passages stitched into a prompt, against the same
		// prompt read in full.
		store, err := kv.Open(kv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		sm := open(engine.Options{KV: store})
		parts, prefix := stitchPrompt(t, sm, bodies(5), question)
		var save []float64
		for _, p := range parts {
			if p.Passage {
				st, err := sm.CachePassage(ctx, prefix, p.Text)
				if err != nil {
					t.Fatal(err)
				}
				save = append(save, st.PrefillMs/float64(max(st.EvalTokens, 1))*1000)
			}
		}
		t.Logf("saving a passage: %s ms per 1,000 tokens read (median of %d)", med(save), len(save))
		gen := func(s *engine.Stitch) engine.Stats {
			sm.ClearSeq(ctx, engine.SeqAnswer)
			st, err := sm.Generate(ctx, engine.GenerateRequest{Parts: parts, Stitch: s, MaxTokens: 1}, func(string) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		for _, k := range []int{0, 4, 16} {
			var stitched, full []float64
			var st engine.Stats
			for range runs {
				st = gen(&engine.Stitch{Prefix: prefix, Repair: k})
				stitched = append(stitched, st.PrefillMs)
				full = append(full, gen(nil).PrefillMs)
			}
			t.Logf("k=%d: %d-token prompt, %d stitched, %d read: prefill %s ms (stitch %.1f ms); read in full %s ms",
				k, st.PromptTokens, st.StitchedTokens, st.EvalTokens, med(stitched), st.StitchMs, med(full))
		}
	})

	t.Run("prefill", func(t *testing.T) {
		// One sequence vs three (unified cache), full batches vs
		// micro-batches, and three sequences with the other two holding
		// unrelated prompts (attention then spans their cells too).
		prompt := prefixes[800]
		other := "Unrelated: " + strings.Repeat("the garden and the market were small and old. ", 120)
		one, three := open(engine.Options{Seqs: 1}), m
		threeFA := open(engine.Options{FlashAttention: "on"})
		micro := map[int]*engine.Model{32: open(engine.Options{}), 128: open(engine.Options{MicroBatch: 128})}
		type config struct {
			name  string
			model *engine.Model
			setup func() error
			run   func() (engine.Stats, error)
		}
		withOthers := func(m *engine.Model) func() error {
			return func() error {
				clearAll(m)
				if _, err := m.Prefetch(ctx, other); err != nil {
					return err
				}
				s, _, err := m.SaveState(ctx, engine.SeqSpeculative)
				if err == nil { // own cells, not shared
					_, err = m.LoadState(ctx, engine.SeqScratch, s)
				}
				return err
			}
		}
		configs := []config{
			{"1 sequence", one, func() error { return one.ClearSeq(ctx, 0) },
				func() (engine.Stats, error) { return one.Prefill(ctx, prompt) }},
			{"3 sequences (unified)", three, func() error { clearAll(three); return nil },
				func() (engine.Stats, error) { return three.Prefill(ctx, prompt) }},
			{"3 sequences, the other two holding 600 tokens each", three, withOthers(three),
				func() (engine.Stats, error) { return three.Prefill(ctx, prompt) }},
			{"3 sequences, Generate with TrimSpeculative after a missed 600-token Prefetch", three, func() error {
				clearAll(three)
				_, err := three.Prefetch(ctx, other)
				return err
			}, func() (engine.Stats, error) {
				return three.Generate(ctx, engine.GenerateRequest{Prompt: prompt, MaxTokens: 1, TrimSpeculative: true},
					func(string) error { return nil })
			}},
			{"3 sequences, flash attention", threeFA, func() error { clearAll(threeFA); return nil },
				func() (engine.Stats, error) { return threeFA.Prefill(ctx, prompt) }},
			{"3 sequences, flash attention, the other two holding 600 tokens each", threeFA, withOthers(threeFA),
				func() (engine.Stats, error) { return threeFA.Prefill(ctx, prompt) }},
		}
		for _, n := range []int{32, 128} {
			mm := micro[n]
			configs = append(configs, config{fmt.Sprintf("Prefetch in %d-token micro-batches", n), mm,
				func() error { clearAll(mm); return nil },
				func() (engine.Stats, error) { return mm.Prefetch(ctx, prompt) }})
		}
		wall, cpu := make([][]float64, len(configs)), make([][]float64, len(configs))
		var tokens int
		for range runs {
			for i, c := range configs {
				if only := os.Getenv("LORE_MEASURE_ONLY"); only != "" && !strings.Contains(c.name, only) {
					continue
				}
				if err := c.setup(); err != nil {
					t.Fatal(c.name, err)
				}
				c0 := runnerCPU(t, c.model)
				st, err := c.run()
				if err != nil {
					t.Fatal(c.name, err)
				}
				wall[i], cpu[i] = append(wall[i], st.PrefillMs), append(cpu[i], runnerCPU(t, c.model)-c0)
				tokens = st.EvalTokens
			}
		}
		only := os.Getenv("LORE_MEASURE_ONLY")
		for i, c := range configs {
			if only != "" && !strings.Contains(c.name, only) {
				continue
			}
			t.Logf("prefill %d tokens, %s: %s ms (min %.0f; %.0f tok/s at the median), runner CPU %s ms (min %.0f)",
				tokens, c.name, med(wall[i]), slices.Min(wall[i]), float64(tokens)/(median(wall[i])/1000), med(cpu[i]), slices.Min(cpu[i]))
		}
	})

	t.Run("preempt", func(t *testing.T) {
		// A question arriving during a Prefetch of the 800-token prompt.
		prompt := prefixes[800]
		var waits, stopped []float64
		for i := range runs + 2 {
			clearAll(m)
			done := make(chan engine.Stats, 1)
			go func() {
				st, _ := m.Prefetch(ctx, prompt)
				done <- st
			}()
			for !m.QueueStats().Busy {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(time.Duration(200+97*i) * time.Millisecond)
			st, err := m.Generate(ctx, engine.GenerateRequest{Prompt: "a question", MaxTokens: 1}, func(string) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			ps := <-done
			if ps.StopReason != "preempted" {
				continue
			}
			waits, stopped = append(waits, st.QueueMs), append(stopped, float64(ps.EvalTokens))
		}
		if len(waits) == 0 {
			t.Fatal("no Prefetch was preempted")
		}
		t.Logf("question behind a Prefetch: waited %s ms (max %.1f) over %d preemptions; the prefetches had evaluated %v tokens",
			med(waits), slices.Max(waits), len(waits), stopped)
	})
}

// runnerCPU returns the CPU time the model's runner has used, in ms.
func runnerCPU(t *testing.T, m *engine.Model) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.RunnerPID()))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) * 10 // clock ticks of 10 ms (USER_HZ 100)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func med(v []float64) string { return fmt.Sprintf("%.1f", median(v)) }
