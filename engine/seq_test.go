package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lore/engine"
	"lore/engine/kv"
	"lore/engine/synth"
)

func openWith(t testing.TB, opt engine.Options) *engine.Model {
	t.Helper()
	if opt.Runner == "" {
		opt.Runner = os.Args[0]
	}
	if opt.Threads == 0 {
		opt.Threads = 2
	}
	if opt.NumCtx == 0 {
		opt.NumCtx = 1024
	}
	m, err := engine.Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// passages returns n lines of varied prose, like retrieved chunks.
func passages(n int) string {
	subjects := []string{"the river market", "a small garden", "the old library", "the students", "a report about energy"}
	verbs := []string{"opened before", "was built near", "wrote about", "stood beside", "was moved to"}
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "Passage %d: %s %s %s in the year %d.\n", i+1, subjects[i%5], verbs[(i/5)%5], subjects[(i+2)%5], 1900+i)
	}
	return b.String()
}

// ragPrompt is a chat prompt with the passages in the system turn; draft is
// the part before the question, what the UI prefetches while the user types.
func ragPrompt(t testing.TB, m *engine.Model, n int, question string) (draft, prompt string) {
	t.Helper()
	draft, err := m.Template().Prefix("You answer from the library.\n" + passages(n))
	if err != nil {
		t.Fatal(err)
	}
	prompt, err = m.Template().Render([]engine.Message{
		{Role: "system", Content: "You answer from the library.\n" + passages(n)},
		{Role: "user", Content: question}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(prompt, draft) {
		t.Fatalf("the draft is not a prefix of the prompt:\n%q\n%q", draft, prompt)
	}
	return draft, prompt
}

func TestPrefetchAdopted(t *testing.T) {
	chat, _ := models(t)
	m := openWith(t, engine.Options{Path: chat})
	draft, prompt := ragPrompt(t, m, 12, question)
	// The answer sequence holds an unrelated conversation.
	generate(t, m, "an earlier question about something else", 4)

	var held, totals, marked []int
	marks := []int{len(draft) / 3, len(draft) * 2 / 3, len(draft)}
	pst, err := m.Prefetch(engine.WithProgress(context.Background(), func(p engine.Progress) {
		if p.Marks == nil {
			t.Errorf("progress %+v says nothing of the marks", p)
			return
		}
		held, totals, marked = append(held, p.Held), append(totals, p.Total), append(marked, *p.Marks)
	}), draft, marks...)
	if err != nil {
		t.Fatal(err)
	}
	// Marks reached: exactly those whose text the held tokens cover.
	for i, h := range held {
		for k, mark := range marks {
			toks, err := m.Tokenize(context.Background(), draft[:mark], true)
			if err != nil {
				t.Fatal(err)
			}
			// The text up to a mark ends at most one token short of its
			// tokens alone (a merge at its end), never past them.
			if reached := k < marked[i]; reached != (len(toks)-1 <= h) && reached != (len(toks) <= h) {
				t.Fatalf("report %d: %d tokens held, %d marks reached; the text up to mark %d is %d tokens", i, h, marked[i], k+1, len(toks))
			}
		}
	}
	if marked[len(marked)-1] != len(marks) || !slices.ContainsFunc(marked, func(n int) bool { return n > 0 && n < len(marks) }) {
		t.Errorf("marks reached per report %v: want some, then all %d", marked, len(marks))
	}
	t.Logf("held per report %v, marks reached %v; tokenize %.2f ms, prefill %.1f ms", held, marked, pst.TokenizeMs, pst.PrefillMs)
	if pst.EvalTokens < 100 || pst.StopReason != "" {
		t.Fatalf("prefetch: %+v", pst)
	}
	// Progress after each 32-token micro-batch, up to the whole prompt.
	if len(held) < pst.EvalTokens/32 || held[len(held)-1] != pst.PromptTokens {
		t.Errorf("progress %v of %v, want one per micro-batch of the %d evaluated tokens ending at %d", held, totals, pst.EvalTokens, pst.PromptTokens)
	}
	for i, h := range held {
		if totals[i] != pst.PromptTokens || i > 0 && h-held[i-1] != min(32, pst.PromptTokens-held[i-1]) {
			t.Fatalf("progress %v of %v: not 32 tokens a step up to %d", held, totals, pst.PromptTokens)
		}
	}
	// The same draft again: nothing to do.
	if again, err := m.Prefetch(context.Background(), draft); err != nil || again.EvalTokens != 0 {
		t.Fatalf("repeated prefetch evaluated %d tokens (err %v)", again.EvalTokens, err)
	}
	out, _, st := generate(t, m, prompt, 12)
	if st.AdoptedSeq != engine.SeqSpeculative || st.AdoptedTokens < pst.PromptTokens-1 {
		t.Errorf("adopted %d tokens from sequence %d, want ≥ %d from the speculative one", st.AdoptedTokens, st.AdoptedSeq, pst.PromptTokens-1)
	}
	if st.CachedTokens != st.AdoptedTokens || st.EvalTokens != st.PromptTokens-st.CachedTokens {
		t.Errorf("token counts: %+v", st)
	}
	cold := openWith(t, engine.Options{Path: chat})
	coldOut, _, cst := generate(t, cold, prompt, 12)
	if cst.CachedTokens != 0 || cst.AdoptedTokens != 0 {
		t.Errorf("cold run reused %d tokens", cst.CachedTokens)
	}
	if out != coldOut {
		t.Errorf("adopted run %q differs from cold run %q", out, coldOut)
	}
	// Both sequences still hold their tokens (the cells are shared).
	n, err := m.SeqTokens(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(n) != 3 || n[engine.SeqSpeculative] != pst.PromptTokens || n[engine.SeqAnswer] < st.PromptTokens {
		t.Errorf("sequence tokens %v; prefetch %d, prompt %d", n, pst.PromptTokens, st.PromptTokens)
	}
	// A prefetch adopts from the answer sequence in turn: only the new tail is evaluated.
	draft2, _ := ragPrompt(t, m, 13, question)
	if st2, err := m.Prefetch(context.Background(), draft2); err != nil || st2.AdoptedSeq != engine.SeqAnswer || st2.EvalTokens > st2.PromptTokens/4 {
		t.Errorf("second prefetch: %+v (err %v)", st2, err)
	}
	// A question the prefetch missed cuts it back to the prefix they share.
	other := "<|im_start|>system\nYou answer from the library.\nSomething else entirely."
	if _, err := m.Generate(context.Background(), engine.GenerateRequest{Prompt: other, MaxTokens: 2, TrimSpeculative: true},
		func(string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	ta, _ := m.Tokenize(context.Background(), draft2, true)
	tb, _ := m.Tokenize(context.Background(), other, true)
	shared := 0
	for shared < min(len(ta), len(tb)) && ta[shared] == tb[shared] {
		shared++
	}
	if n, _ := m.SeqTokens(context.Background()); n[engine.SeqSpeculative] != shared {
		t.Errorf("after a missed prefetch the speculative sequence holds %d tokens, want the %d it shares with the prompt", n[engine.SeqSpeculative], shared)
	}
}

func TestPrefetchNeedsSequences(t *testing.T) {
	chat, _ := models(t)
	m := openWith(t, engine.Options{Path: chat, Seqs: 1})
	if _, err := m.Prefetch(context.Background(), "text"); !errors.Is(err, engine.ErrNoSpeculative) {
		t.Fatalf("err = %v, want ErrNoSpeculative", err)
	}
}

func TestStateSaveLoad(t *testing.T) {
	chat, _ := models(t)
	ctx := context.Background()
	a := openWith(t, engine.Options{Path: chat})
	draft, prompt := ragPrompt(t, a, 8, question)
	pst, err := a.Prefill(ctx, draft)
	if err != nil {
		t.Fatal(err)
	}
	s, sst, err := a.SaveState(ctx, engine.SeqAnswer)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Tokens) != pst.PromptTokens || len(s.Data) == 0 || sst.StateBytes != len(s.Data) {
		t.Fatalf("state of %d tokens, %d bytes; prefill had %d tokens", len(s.Tokens), len(s.Data), pst.PromptTokens)
	}
	want, _, _ := generate(t, openWith(t, engine.Options{Path: chat}), prompt, 12)

	for _, seq := range []int{engine.SeqAnswer, engine.SeqScratch} {
		t.Run(fmt.Sprint("seq=", seq), func(t *testing.T) {
			b := openWith(t, engine.Options{Path: chat})
			lst, err := b.LoadState(ctx, seq, s)
			if err != nil {
				t.Fatal(err)
			}
			if !lst.Restored || lst.CachedTokens != len(s.Tokens) {
				t.Errorf("load: %+v", lst)
			}
			got, _, st := generate(t, b, prompt, 12)
			if st.CachedTokens < len(s.Tokens)-1 {
				t.Errorf("generate after load reused %d of %d tokens", st.CachedTokens, len(s.Tokens))
			}
			if seq != engine.SeqAnswer && (st.AdoptedSeq != seq || st.AdoptedTokens != st.CachedTokens) {
				t.Errorf("adopted %d tokens from %d, want them from %d", st.AdoptedTokens, st.AdoptedSeq, seq)
			}
			if got != want {
				t.Errorf("after restore %q, without %q", got, want)
			}
		})
	}

	// A state whose tokens do not match its positions is refused, and the
	// runner carries on.
	b := openWith(t, engine.Options{Path: chat})
	short := engine.State{Tokens: s.Tokens[:len(s.Tokens)-3], Data: s.Data}
	if _, err := b.LoadState(ctx, engine.SeqAnswer, short); err == nil {
		t.Error("state loaded with the wrong token count")
	}
	if n, err := b.SeqTokens(ctx); err != nil || n[engine.SeqAnswer] != 0 {
		t.Errorf("after a refused load: %v, %v", n, err)
	}
	if got, _, _ := generate(t, b, prompt, 12); got != want {
		t.Errorf("after a refused load %q, want %q", got, want)
	}
}

func TestWarmFromStore(t *testing.T) {
	chat, _ := models(t)
	ctx := context.Background()
	dir := t.TempDir()
	store := func() *kv.Store {
		s, err := kv.Open(kv.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s1 := store()
	m := openWith(t, engine.Options{Path: chat, KV: s1})
	prefix, prompt := ragPrompt(t, m, 6, question)
	want, _, _ := generate(t, openWith(t, engine.Options{Path: chat}), prompt, 12)

	st, err := m.Warm(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if st.Restored || st.EvalTokens != st.PromptTokens || st.StateBytes == 0 {
		t.Fatalf("first warm: %+v", st)
	}
	if ss := s1.Stats(); ss.DiskFiles != 1 {
		t.Fatalf("store after the first warm: %+v", ss)
	}
	// Warm again on the live runner: the prefix is in the cache already.
	if st, err := m.Warm(ctx, prefix); err != nil || st.Restored || st.EvalTokens != 0 {
		t.Errorf("second warm: %+v, %v", st, err)
	}
	m.Close()

	// A restarted app: a new store over the same folder and a new model.
	m2 := openWith(t, engine.Options{Path: chat, KV: store()})
	st2, err := m2.Warm(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if !st2.Restored || st2.EvalTokens != 0 || st2.CachedTokens != st.PromptTokens || st2.RestoreMs <= 0 {
		t.Fatalf("warm after restart: %+v", st2)
	}
	got, _, gst := generate(t, m2, prompt, 12)
	if gst.CachedTokens < st.PromptTokens-1 || got != want {
		t.Errorf("after restore: cached %d, output %q, want %q", gst.CachedTokens, got, want)
	}

	// A restarted runner re-warms from the store.
	syscall.Kill(m2.RunnerPID(), syscall.SIGKILL)
	eventually(t, "the model noticed its runner's death", func() bool { return m2.RunnerPID() == 0 })
	got, _, gst = generate(t, m2, prompt, 12)
	if ws := m2.WarmStats(); !ws.Restored || gst.CachedTokens < st.PromptTokens-1 || got != want {
		t.Errorf("after a runner restart: warm %+v, cached %d, output %q", ws, gst.CachedTokens, got)
	}

	// A corrupted file is discarded, the prefix prefilled and saved again.
	files, _ := filepath.Glob(filepath.Join(dir, "*.kvs"))
	if len(files) != 1 {
		t.Fatalf("state files %v", files)
	}
	b, _ := os.ReadFile(files[0])
	b[len(b)/2] ^= 0x40
	os.WriteFile(files[0], b, 0o600)
	s3 := store()
	m3 := openWith(t, engine.Options{Path: chat, KV: s3})
	st3, err := m3.Warm(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if st3.Restored || st3.EvalTokens != st.PromptTokens || s3.Stats().Discarded != 1 {
		t.Errorf("warm over a corrupt file: %+v, store %+v", st3, s3.Stats())
	}
	if got, _, _ := generate(t, m3, prompt, 12); got != want {
		t.Errorf("after rebuilding: %q, want %q", got, want)
	}
	m4 := openWith(t, engine.Options{Path: chat, KV: store()})
	if st4, err := m4.Warm(ctx, prefix); err != nil || !st4.Restored {
		t.Errorf("warm from the rebuilt file: %+v, %v", st4, err)
	}

	// Other context settings do not use the file.
	m5 := openWith(t, engine.Options{Path: chat, KV: store(), NumCtx: 512})
	if st5, err := m5.Warm(ctx, prefix); err != nil || st5.Restored {
		t.Errorf("warm with another context size: %+v, %v", st5, err)
	}
}

var (
	bigOnce sync.Once
	bigPath string
	bigErr  error
)

// bigModel is the 0.5b synthetic chat model: slow enough (hundreds of
// tokens a second on two cores) for a prefill to be interrupted.
func bigModel(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("writes and runs a 0.5b model")
	}
	models(t)
	bigOnce.Do(func() {
		bigPath = filepath.Join(modelsDir, "chat-0.5b.gguf")
		bigErr = synth.Write(bigPath, synth.Options{Shape: "0.5b", Seed: 4})
	})
	if bigErr != nil {
		t.Fatal(bigErr)
	}
	return bigPath
}

func TestPrefetchPreempted(t *testing.T) {
	path := bigModel(t)
	ctx := context.Background()
	m := openWith(t, engine.Options{Path: path, NumCtx: 2048})
	draft, prompt := ragPrompt(t, m, 25, question)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}

	// A full prefetch, for the time a whole one takes.
	full, err := m.Prefetch(ctx, draft)
	if err != nil {
		t.Fatal(err)
	}
	if full.EvalTokens < 400 {
		t.Fatalf("draft of %d tokens: too short for this test", full.EvalTokens)
	}
	if err := m.ClearSeq(ctx, engine.SeqSpeculative); err != nil {
		t.Fatal(err)
	}

	// Again, interrupted by a question once the prefetch has evaluated its
	// first micro-batch (WithProgress says so). Should it have run to the
	// end before the question came (the machine is shared), again.
	type result struct {
		st  engine.Stats
		err error
	}
	var r result
	var st engine.Stats
	for try := range 3 {
		if err := m.ClearSeq(ctx, engine.SeqSpeculative); err != nil {
			t.Fatal(err)
		}
		started := make(chan struct{})
		var once sync.Once
		pctx := engine.WithProgress(ctx, func(engine.Progress) { once.Do(func() { close(started) }) })
		done := make(chan result, 1)
		go func() {
			st, err := m.Prefetch(pctx, draft)
			done <- result{st, err}
		}()
		select {
		case <-started:
		case r = <-done:
			t.Fatalf("prefetch ended before its first micro-batch: %+v, %v", r.st, r.err)
		case <-time.After(time.Minute):
			t.Fatal("no micro-batch of the prefetch evaluated within a minute")
		}
		_, _, st = generate(t, m, "a question about something else entirely", 4)
		if r = <-done; r.err == nil {
			t.Logf("try %d: the prefetch finished before the question came", try)
			continue
		}
		break
	}
	if !errors.Is(r.err, engine.ErrPreempted) || r.st.StopReason != "preempted" {
		t.Fatalf("prefetch: err %v, stats %+v; want ErrPreempted", r.err, r.st)
	}
	// It stopped part of the way: after the micro-batch the question
	// waited for, before the end. How long the question waited is only
	// logged (at most the micro-batch in flight; less, as the decode aborts).
	if r.st.EvalTokens == 0 || r.st.EvalTokens >= full.EvalTokens {
		t.Fatalf("preempted prefetch evaluated %d of %d tokens", r.st.EvalTokens, full.EvalTokens)
	}
	perToken := r.st.PrefillMs / float64(r.st.EvalTokens)
	t.Logf("question waited %.1f ms; the prefetch stopped after %d of %d tokens (rest ≈ %.0f ms, micro-batch ≈ %.0f ms)",
		st.QueueMs, r.st.EvalTokens, full.EvalTokens, perToken*float64(full.EvalTokens-r.st.EvalTokens), perToken*32)
	// The partial prefix is kept, and the next prompt adopts it.
	n, err := m.SeqTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n[engine.SeqSpeculative] != r.st.CachedTokens+r.st.EvalTokens {
		t.Errorf("speculative sequence holds %d tokens, the prefetch evaluated %d after %d cached", n[engine.SeqSpeculative], r.st.EvalTokens, r.st.CachedTokens)
	}
	_, _, gst := generate(t, m, prompt, 2)
	if gst.AdoptedSeq != engine.SeqSpeculative || gst.AdoptedTokens < r.st.EvalTokens {
		t.Errorf("generate adopted %d tokens from %d; the partial prefetch held %d", gst.AdoptedTokens, gst.AdoptedSeq, n[engine.SeqSpeculative])
	}
}

func TestPrefetchSuperseded(t *testing.T) {
	path := bigModel(t)
	ctx := context.Background()
	m := openWith(t, engine.Options{Path: path, NumCtx: 2048})
	draft, _ := ragPrompt(t, m, 25, question)
	newer, _ := ragPrompt(t, m, 3, "another question")
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var old engine.Stats
	go func() {
		var err error
		old, err = m.Prefetch(ctx, draft)
		done <- err
	}()
	eventually(t, "the older prefetch took the model", func() bool { return m.QueueStats().Busy })
	st, err := m.Prefetch(ctx, newer)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, engine.ErrSuperseded) || old.StopReason != "superseded" {
		t.Fatalf("older prefetch: err %v, stats %+v; want ErrSuperseded", err, old)
	}
	if n, _ := m.SeqTokens(ctx); n[engine.SeqSpeculative] != st.PromptTokens {
		t.Errorf("speculative sequence holds %d tokens, want the newer draft's %d", n[engine.SeqSpeculative], st.PromptTokens)
	}
}

// textOf returns prose of about n tokens, starting with tag.
func textOf(t *testing.T, m *engine.Model, tag string, n int) string {
	t.Helper()
	for k := 1; ; k++ {
		s := tag + "\n" + passages(k)
		toks, err := m.Tokenize(context.Background(), s, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(toks) >= n {
			return s
		}
	}
}

func TestKVCacheFull(t *testing.T) {
	chat, _ := models(t)
	ctx := context.Background()
	m := openWith(t, engine.Options{Path: chat, NumCtx: 256})
	a, b := textOf(t, m, "First:", 190), textOf(t, m, "Second:", 190)

	// The scratch sequence fills most of the cache with a state of its own;
	// the answer needs room and evicts it.
	if _, err := m.Prefetch(ctx, b); err != nil {
		t.Fatal(err)
	}
	s, _, err := m.SaveState(ctx, engine.SeqSpeculative)
	if err != nil {
		t.Fatal(err)
	}
	m.ClearSeq(ctx, engine.SeqSpeculative)
	if _, err := m.LoadState(ctx, engine.SeqScratch, s); err != nil {
		t.Fatal(err)
	}
	out, _, st := generate(t, m, a, 4)
	if st.Evicted != 1 {
		t.Errorf("generate evicted %d sequences, want 1", st.Evicted)
	}
	if n, _ := m.SeqTokens(ctx); n[engine.SeqScratch] != 0 || n[engine.SeqAnswer] != st.PromptTokens+st.DecodeTokens {
		t.Errorf("sequences after eviction: %v (prompt %d tokens)", n, st.PromptTokens)
	}
	if want, _, _ := generate(t, openWith(t, engine.Options{Path: chat, NumCtx: 256}), a, 4); out != want {
		t.Errorf("after an eviction %q, cold %q", out, want)
	}

	// A prefetch never evicts the answer: it fails, and the answer keeps its tokens.
	before, _ := m.SeqTokens(ctx)
	if _, err := m.Prefetch(ctx, b); err == nil {
		t.Error("a prefetch that does not fit succeeded")
	}
	if n, _ := m.SeqTokens(ctx); n[engine.SeqAnswer] != before[engine.SeqAnswer] {
		t.Errorf("answer sequence %d tokens after a failed prefetch, %d before", n[engine.SeqAnswer], before[engine.SeqAnswer])
	}
	if _, _, st := generate(t, m, a, 4); st.CachedTokens != st.PromptTokens-1 {
		t.Errorf("the answer's cache was lost: %+v", st)
	}

	// Trimmed, the answer keeps its head and evaluates the rest again.
	if err := m.TrimSeq(ctx, engine.SeqAnswer, 50); err != nil {
		t.Fatal(err)
	}
	if n, _ := m.SeqTokens(ctx); n[engine.SeqAnswer] != 50 {
		t.Errorf("answer holds %d tokens after trimming to 50", n[engine.SeqAnswer])
	}
	if got, _, st := generate(t, m, a, 4); st.CachedTokens != 50 || got != out {
		t.Errorf("after trimming: cached %d, output %q, want 50 and %q", st.CachedTokens, got, out)
	}
}
