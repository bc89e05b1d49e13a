package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"lore/app"
	"lore/bench"
	"lore/eval"
)

// ttftReport is what `lore bench ttft` measures: Enter → first token (the
// server's ttft_ms) for questions asked cold, typed at a human pace with
// the UI's prefetch rule replayed, asked as follow-ups, and the first one
// after a restart.
type ttftReport struct {
	CPU            string  `json:"cpu"`
	Model          string  `json:"model"`
	Questions      int     `json:"questions"`
	CharsPerSecond float64 `json:"chars_per_s"`

	ColdP50         float64  `json:"cold_p50_ms"`
	ColdP95         float64  `json:"cold_p95_ms"`
	TypedP50        float64  `json:"typed_p50_ms"`
	TypedP95        float64  `json:"typed_p95_ms"`
	PrefetchHit     float64  `json:"prefetch_hit_rate"`     // the drafts had read every passage
	PrefetchAdopted float64  `json:"prefetch_adopted_rate"` // hits and partial hits: the drafts' reading was used
	PrefetchMisses  []string `json:"prefetch_misses"`
	LatePassages    int      `json:"typed_late_passages"` // left out to keep the first-token budget, in all
	CutPassages     int      `json:"typed_cut_passages"`  // best passages cut for that budget
	// ColdRecall and TypedRecall are the share of questions whose prompt
	// held a document labelled relevant: what typing ahead costs the answer.
	ColdRecall   float64 `json:"cold_prompt_recall"`
	TypedRecall  float64 `json:"typed_prompt_recall"`
	PromptP50    float64 `json:"prompt_tokens_p50"`
	ColdEvalP50  float64 `json:"cold_eval_tokens_p50"`
	TypedEvalP50 float64 `json:"typed_eval_tokens_p50"`
	// ContextTokens is the passage budget the questions ran with (0: auto).
	ContextTokens int `json:"context_tokens"`
	// ColdAccuracy and TypedAccuracy (with --answers) are the share of
	// answers that hold a gold phrase (or, for a question the library
	// cannot answer, decline): what the speed was bought with, if anything.
	ColdAccuracy  *float64 `json:"cold_accuracy,omitempty"`
	TypedAccuracy *float64 `json:"typed_accuracy,omitempty"`

	// Again: earlier cold questions asked again, each in a new chat, once
	// other questions have passed through the model (its runner's kept
	// states); AgainSame counts the answers word for word as the first time.
	AgainP50     float64 `json:"again_p50_ms"`
	AgainP95     float64 `json:"again_p95_ms"`
	AgainEvalP50 float64 `json:"again_eval_tokens_p50"`
	AgainN       int     `json:"again_questions"`
	AgainSame    int     `json:"again_same_answers"`

	FollowupP50    float64 `json:"followup_p50_ms"`
	FollowupP95    float64 `json:"followup_p95_ms"`
	FollowupReuse  float64 `json:"followup_reuse"`   // median cached_tokens / the previous prompt's tokens; -1: unknown (the server reports no counts)
	FollowupReeval float64 `json:"followup_reeval"`  // median share of the previous prompt evaluated again; -1: unknown
	FollowupNew    float64 `json:"followup_new_p50"` // median tokens evaluated that the previous prompt did not hold

	SystemTokens     int     `json:"system_prefix_tokens"`
	PrefixPrefillMs  float64 `json:"system_prefix_prefill_ms"` // the first start: read
	RestartWarmMs    float64 `json:"restart_warm_ms"`          // after a restart: restored
	RestartRestored  bool    `json:"restart_restored"`
	RestartReadyMs   float64 `json:"restart_ready_ms"` // app start to warm, model load included
	RestartFirstTTFT float64 `json:"restart_first_ttft_ms"`
	RestartBudget    string  `json:"restart_budget_from"` // where the first question's passage budget came from

	*stitchReport // with --stitched
	*routeReport  // with --route
}

func benchTTFT(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench ttft", flag.ContinueOnError)
	dir := fs.String("dir", filepath.Join(os.TempDir(), "lore-bench-ttft"), "`folder` for the synthetic models and library")
	shape := fs.String("shape", "0.5b", "synthetic chat model shape (when --model is not given)")
	model := fs.String("model", "", "chat model GGUF `file` (default: a synthetic one of --shape)")
	n := fs.Int("questions", 20, "questions per mode, from the sample library's labelled queries")
	cps := fs.Float64("cps", 5, "typing speed in characters per second")
	maxTokens := fs.Int("max-tokens", 8, "tokens generated per answer (with --answers at least 64, enough to grade)")
	contextTokens := fs.Int("context-tokens", fullContext, "passage token budget: the top-K passages whole by default (0: auto, about a second of prefill)")
	answers := fs.String("answers", "", "grade the answers against this answer set (eval/answers-sample.jsonl: the sample library's), whose questions replace the labelled queries; use a real model (lore models fetch)")
	asJSON := fs.Bool("json", false, "print JSON")
	only := fs.String("only", "cold,again,typed,followup,stitched,restart", "scenarios to run, comma-separated (again needs cold)")
	repair := fs.Int("repair", app.DefaultPassageRepair, "tokens of each stitched passage read again")
	fidelity := fs.Bool("fidelity", false, "compare stitched prompts with full reading (k = 0, 4, 16, 32, all)")
	chatURL := fs.String("chat-url", "", "OpenAI-compatible server `URL` that answers (the local model stays as its fallback); key: $LORE_API_KEY or `lore key set`")
	chatURLModel := fs.String("chat-url-model", "", "model `name` to ask the --chat-url server for")
	route := fs.Bool("route", false, "also measure TTFT per route: each question asked of the main and of the fast chat model")
	fastModel := fs.String("fast-model", "", "fast chat model GGUF `file` for --route (default: a synthetic one of --fast-shape)")
	fastShape := fs.String("fast-shape", "tiny", "synthetic fast model shape for --route")
	useEmbed := fs.Bool("embed", true, "retrieve with an embedding model (false: BM25 only, as with no embedding model)")
	embedModel := fs.String("embed-model", "", "embedding model GGUF `file` (default: a synthetic one; `lore models fetch` has the real all-MiniLM-L6-v2)")
	drafts := fs.Bool("drafts", false, "log what each typed draft started and what was read ahead at Enter")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	want := func(scenario string) bool { return slices.Contains(strings.Split(*only, ","), scenario) }
	chat, embed, lib, err := bench.Demo(*dir, *shape, os.Stderr)
	if err != nil {
		return err
	}
	if *model != "" {
		chat = *model
	}
	if *embedModel != "" {
		embed = *embedModel
	}
	if !*useEmbed {
		embed = ""
	}
	fast := ""
	if *route {
		if fast, err = fastModelFor(*fastModel, *fastShape, *dir); err != nil {
			return err
		}
	}
	qs, err := app.ReadEvalQueries(bytes.NewReader(bench.SampleQueries()))
	if err != nil {
		return err
	}
	gold := map[string]eval.Question{}
	if *answers != "" {
		if qs, gold, err = answerSet(*answers); err != nil {
			return err
		}
		*maxTokens = max(*maxTokens, 64)
	}
	if *n > len(qs) {
		*n = len(qs)
	}
	data, err := os.MkdirTemp(*dir, "data-") // a fresh data folder: the first start reads the system prefix
	if err != nil {
		return err
	}
	defer os.RemoveAll(data)
	open := func() (*app.App, error) {
		a, err := app.New(ctx, app.Config{DataDir: data, ChatModel: chat, FastChatModel: fast, EmbedModel: embed, Warm: true,
			ChatURL: *chatURL, ChatURLModel: *chatURLModel, APIKey: os.Getenv(app.APIKeyEnv), Keyring: true})
		if err != nil {
			return nil, err
		}
		if err := a.WaitWarm(ctx); err != nil {
			a.Close()
			return nil, err
		}
		return a, nil
	}
	a, err := open()
	if err != nil {
		return err
	}
	defer func() { a.Close() }()
	s := a.Settings()
	s.MaxTokens, s.ContextTokens = *maxTokens, *contextTokens
	if err := a.SaveSettings(ctx, s); err != nil {
		return err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	logf("indexing the sample library…")
	if _, err := a.Index(ctx, "", []string{lib}, nil); err != nil {
		return err
	}
	rep := ttftReport{CPU: cpuModel() + " · runner " + app.DescribeCPU().Variant, Model: filepath.Base(chat), Questions: *n, CharsPerSecond: *cps}
	warm := a.Warmed()
	rep.SystemTokens, rep.PrefixPrefillMs = warm.Tokens, warm.PrefillMs
	// found tells whether a question's prompt held a document labelled
	// relevant to it: what the answer had to go on.
	found := map[string]bool{}
	answer := map[string]*strings.Builder{}
	askOne := func(q string, chat int64) (*app.Trace, error) {
		answer[q] = &strings.Builder{}
		return a.Ask(ctx, app.AskRequest{Question: q, ChatID: chat}, func(ev app.Event) error {
			if tok, ok := ev.(app.Token); ok {
				answer[q].WriteString(tok.Text)
			}
			if src, ok := ev.(app.Sources); ok {
				found[q] = false
				for _, s := range src {
					for _, e := range qs {
						if e.Query == q && slices.Contains(e.Relevant, s.Document) {
							found[q] = true
						}
					}
				}
			}
			return nil
		})
	}
	recall := func(n *int, q string) {
		if found[q] {
			*n++
		}
	}
	// right counts an answer that holds a gold phrase (or declines a
	// question the library cannot answer).
	right := func(n *int, q string) {
		if g, ok := gold[q]; ok && correct(g, answer[q].String()) {
			*n++
		}
	}
	rep.ContextTokens = *contextTokens

	var cold, prompts, coldEval []float64
	var coldFound, typedFound, coldRight, typedRight int
	for i, q := range qs[:*n] {
		if !want("cold") {
			break
		}
		tr, err := askOne(q.Query, 0)
		if err != nil {
			return err
		}
		cold = append(cold, tr.Stages[app.StageTTFT])
		recall(&coldFound, q.Query)
		right(&coldRight, q.Query)
		prompts = append(prompts, float64(tr.PromptTokens))
		coldEval = append(coldEval, float64(tr.EvalTokens))
		logf("cold %2d/%d: ttft %6.0f ms, %d prompt tokens, %d evaluated, %d restored%s", i+1, *n, tr.Stages[app.StageTTFT],
			tr.PromptTokens, tr.EvalTokens, tr.Restored, note(tr.RestoreNote))
	}

	// Again: up to maxAgain cold questions before the last, each asked in a
	// new chat once later questions have used the answer sequence.
	var again, againEval []float64
	if want("again") && len(cold) > 2 {
		first := map[string]string{}
		for _, q := range qs[:*n] {
			first[q.Query] = answer[q.Query].String()
		}
		for _, q := range qs[max(*n-1-maxAgain, 0) : *n-1] {
			tr, err := askOne(q.Query, 0)
			if err != nil {
				return err
			}
			again = append(again, tr.Stages[app.StageTTFT])
			againEval = append(againEval, float64(tr.EvalTokens))
			same := answer[q.Query].String() == first[q.Query]
			if same {
				rep.AgainSame++
			}
			logf("again %2d: ttft %6.0f ms, %d prompt tokens, %d evaluated, %d restored%s; the same answer: %v", len(again),
				tr.Stages[app.StageTTFT], tr.PromptTokens, tr.EvalTokens, tr.Restored, note(tr.RestoreNote), same)
		}
		rep.AgainN = len(again)
		rep.AgainP50, rep.AgainP95 = pctOf(sorted(again), 0.5), pctOf(sorted(again), 0.95)
		rep.AgainEvalP50 = pctOf(sorted(againEval), 0.5)
	}

	gap := time.Duration(float64(time.Second) / *cps)
	var partial, late, cut int
	typedRun := func(mode string, qs []app.EvalQuery) (ttft, eval []float64, hits int, misses []string, err error) {
		for i, q := range qs {
			sends, enter := bench.Typing(q.Query, gap)
			start := time.Now()
			for _, d := range sends {
				time.Sleep(time.Until(start.Add(d.At)))
				go func() {
					res, err := a.Prefetch(ctx, app.PrefetchRequest{Draft: d.Draft, ClientID: "bench"})
					if *drafts {
						logf("  %5.0f ms %q: %+v %v; then %+v", float64(time.Since(start).Milliseconds()), d.Draft, res, err, a.PrefetchStatus())
					}
				}()
			}
			time.Sleep(time.Until(start.Add(enter)))
			if *drafts {
				logf("  %5.0f ms Enter: read ahead %+v", float64(time.Since(start).Milliseconds()), a.PrefetchStatus())
			}
			tr, err := askOne(q.Query, 0)
			if err != nil {
				return nil, nil, 0, nil, err
			}
			ttft = append(ttft, tr.Stages[app.StageTTFT])
			eval = append(eval, float64(tr.EvalTokens))
			switch tr.Prefetch {
			case app.PrefetchHit:
				hits++
			case app.PrefetchPartial:
				partial++
			default:
				misses = append(misses, fmt.Sprintf("%s: %s", tr.Prefetch, tr.PrefetchMiss))
			}
			late += tr.LatePassages
			cutTokens := 0
			if tr.Cut != nil {
				cut++
				cutTokens = tr.Cut.Tokens
			}
			if mode == "typed" {
				recall(&typedFound, q.Query)
				right(&typedRight, q.Query)
			}
			st := tr.Stages
			logf("%s %2d/%d: ttft %6.0f ms, prefetch %s %s (%d tokens prefilled while typing, %d stitched, %d restored, %d evaluated after Enter; passages: %d new, %d stale, %d late, %d tokens cut; ms: queue %.0f, retrieval %.0f (embed %.0f, rerank %.0f), assemble %.0f, prefill %.0f, first decode %.0f)", mode, i+1, len(qs),
				st[app.StageTTFT], tr.Prefetch, tr.PrefetchMiss, tr.PrefetchedTokens, tr.StitchedTokens, tr.Restored, tr.EvalTokens,
				tr.PrefetchNewPassages, tr.StalePassages, tr.LatePassages, cutTokens,
				st[app.StageQueue], st[app.StageRetrieval], st[app.StageEmbed], st[app.StageRerank], st[app.StageAssemble], st[app.StagePrefill], st[app.StageFirstDecode])
		}
		return ttft, eval, hits, misses, nil
	}
	var typed, typedEval []float64
	var hits int
	var misses []string
	if want("typed") {
		if typed, typedEval, hits, misses, err = typedRun("typed", qs[:*n]); err != nil {
			return err
		}
	}
	rep.PrefetchMisses = misses
	rep.PrefetchHit = round2(float64(hits) / float64(max(*n, 1)))
	rep.PrefetchAdopted = round2(float64(hits+partial) / float64(max(*n, 1)))
	rep.LatePassages, rep.CutPassages = late, cut
	rep.ColdRecall = round2(float64(coldFound) / float64(max(*n, 1)))
	rep.TypedRecall = round2(float64(typedFound) / float64(max(*n, 1)))
	if len(gold) > 0 {
		rep.ColdAccuracy, rep.TypedAccuracy = new(round2(float64(coldRight)/float64(max(*n, 1)))), new(round2(float64(typedRight)/float64(max(*n, 1))))
	}

	// Follow-ups: a second question about the same document, in the same chat.
	var follow, reuse, evalRatio, fresh []float64
	unknownReuse := false
	for i, pair := range sameDocPairs(qs, *n) {
		if !want("followup") {
			break
		}
		first, err := askOne(pair[0], 0)
		if err != nil {
			return err
		}
		next, err := askOne(pair[1], first.ChatID)
		if err != nil {
			return err
		}
		follow = append(follow, next.Stages[app.StageTTFT])
		if next.CachedTokens < 0 || first.PromptTokens < 0 {
			unknownReuse = true // a remote server that reports no cached count
		}
		reuse = append(reuse, float64(next.CachedTokens)/float64(max(first.PromptTokens, 1)))
		evalRatio = append(evalRatio, float64(max(first.PromptTokens-next.CachedTokens, 0))/float64(max(first.PromptTokens, 1)))
		fresh = append(fresh, float64(next.PromptTokens-max(first.PromptTokens, next.CachedTokens)))
		logf("follow-up %2d: ttft %6.0f ms, %d of the previous %d prompt tokens reused, %d evaluated", i+1,
			next.Stages[app.StageTTFT], next.CachedTokens, first.PromptTokens, next.EvalTokens)
	}

	if want("stitched") || *fidelity {
		var texts []string
		for _, q := range qs[:*n] {
			texts = append(texts, q.Query)
		}
		ask := func(q string) (*app.Trace, error) { return askOne(q, 0) }
		// Typed with passage KV on: questions not asked before, whose drafts'
		// passages are saved while the user types.
		fresh := qs[*n:min(2**n, len(qs))]
		typedStitched := func() ([]float64, int, error) {
			ttft, _, hits, _, err := typedRun("typed+stitch", fresh)
			return ttft, hits, err
		}
		if rep.stitchReport, err = benchStitched(ctx, a, texts, *repair, *fidelity, ask, typedStitched, logf); err != nil {
			return err
		}
	}

	if *route {
		var texts []string
		for _, q := range qs[:*n] {
			texts = append(texts, q.Query)
		}
		ask := func(q, route string) (*app.Trace, error) {
			return a.Ask(ctx, app.AskRequest{Question: q, Route: route}, func(app.Event) error { return nil })
		}
		if rep.routeReport, err = benchRoutes(texts, fast, ask, logf); err != nil {
			return err
		}
	}

	rep.ColdP50, rep.ColdP95 = pctOf(sorted(cold), 0.5), pctOf(sorted(cold), 0.95)
	rep.TypedP50, rep.TypedP95 = pctOf(sorted(typed), 0.5), pctOf(sorted(typed), 0.95)
	rep.PromptP50 = pctOf(sorted(prompts), 0.5)
	rep.ColdEvalP50, rep.TypedEvalP50 = pctOf(sorted(coldEval), 0.5), pctOf(sorted(typedEval), 0.5)
	rep.FollowupP50, rep.FollowupP95 = pctOf(sorted(follow), 0.5), pctOf(sorted(follow), 0.95)
	rep.FollowupReuse, rep.FollowupReeval = round2(pctOf(sorted(reuse), 0.5)), round2(pctOf(sorted(evalRatio), 0.5))
	rep.FollowupNew = pctOf(sorted(fresh), 0.5)
	if unknownReuse {
		rep.FollowupReuse, rep.FollowupReeval, rep.FollowupNew = -1, -1, -1
	}

	// Restart: a new app on the same data folder restores the system prefix.
	if !want("restart") {
		return rep.print(*asJSON, *cps)
	}
	a.Close()
	start := time.Now()
	if a, err = open(); err != nil {
		return err
	}
	rep.RestartReadyMs = round2(float64(time.Since(start).Microseconds()) / 1000)
	w := a.Warmed()
	rep.RestartRestored, rep.RestartWarmMs = w.Restored, w.RestoreMs
	if !w.Restored {
		rep.RestartWarmMs = w.PrefillMs
	}
	tr, err := askOne(qs[0].Query, 0)
	if err != nil {
		return err
	}
	rep.RestartFirstTTFT, rep.RestartBudget = tr.Stages[app.StageTTFT], tr.ContextBudgetFrom
	return rep.print(*asJSON, *cps)
}

func (rep *ttftReport) print(asJSON bool, cps float64) error {
	if asJSON {
		return printJSON(rep)
	}
	budget := "auto"
	if rep.ContextTokens > 0 {
		budget = fmt.Sprintf("%d tokens", rep.ContextTokens)
	}
	prompts := ""
	if rep.PromptP50 > 0 { // measured on the cold questions
		prompts = fmt.Sprintf(", %d-token prompts (median)", int(rep.PromptP50))
	}
	fmt.Printf("TTFT (Enter → first token, server side) on %s, %d questions%s, passage budget %s\n", rep.Model, rep.Questions, prompts, budget)
	acc := func(a *float64) string {
		if a == nil {
			return ""
		}
		return fmt.Sprintf("; accuracy %.0f%%", 100**a)
	}
	// A scenario left out (--only) has no row: its TTFT is 0.
	if rep.ColdP50 > 0 {
		fmt.Printf("  cold       p50 %6.0f ms  p95 %6.0f ms  (%d tokens evaluated, median; prompts held a relevant document for %.0f%%%s)\n",
			rep.ColdP50, rep.ColdP95, int(rep.ColdEvalP50), 100*rep.ColdRecall, acc(rep.ColdAccuracy))
	}
	if rep.TypedP50 > 0 {
		fmt.Printf("  typed      p50 %6.0f ms  p95 %6.0f ms  (%d evaluated; prefetch hit rate %.0f%%, adopted %.0f%% at %.0f chars/s; %d passages left out and %d cut for time; prompts held a relevant document for %.0f%%%s)\n",
			rep.TypedP50, rep.TypedP95, int(rep.TypedEvalP50), 100*rep.PrefetchHit, 100*rep.PrefetchAdopted, cps, rep.LatePassages, rep.CutPassages, 100*rep.TypedRecall, acc(rep.TypedAccuracy))
	}
	if rep.AgainN > 0 {
		fmt.Printf("  again      p50 %6.0f ms  p95 %6.0f ms  (%d earlier questions, each in a new chat: %d evaluated, median; %d of %d answers the same as the first time)\n",
			rep.AgainP50, rep.AgainP95, rep.AgainN, int(rep.AgainEvalP50), rep.AgainSame, rep.AgainN)
	}
	switch {
	case rep.FollowupP50 == 0: // not run (--only)
	case rep.FollowupReuse < 0:
		fmt.Printf("  follow-up  p50 %6.0f ms  p95 %6.0f ms  (the server reports no cached tokens: reuse unknown)\n", rep.FollowupP50, rep.FollowupP95)
	default:
		fmt.Printf("  follow-up  p50 %6.0f ms  p95 %6.0f ms  (reuses %.0f%% of the previous prompt, evaluates %.0f%% of it again; %d new tokens, median)\n",
			rep.FollowupP50, rep.FollowupP95, 100*rep.FollowupReuse, 100*rep.FollowupReeval, int(rep.FollowupNew))
	}
	if rep.RestartFirstTTFT > 0 {
		fmt.Printf("  restart    system prefix (%d tokens) %s in %.1f ms (read in %.1f ms on the first start); app ready in %.0f ms; first question %0.f ms (passage budget: %s)\n",
			rep.SystemTokens, map[bool]string{true: "restored", false: "read"}[rep.RestartRestored], rep.RestartWarmMs, rep.PrefixPrefillMs, rep.RestartReadyMs, rep.RestartFirstTTFT, rep.RestartBudget)
	}
	if rep.stitchReport != nil {
		rep.stitchReport.print()
	}
	if rep.routeReport != nil {
		rep.routeReport.print()
	}
	return nil
}

// fullContext is bench ttft's passage budget: the top-K passages whole (the
// default top_k of them fit), as `lore eval answers` reads them.
const fullContext = 3072

// answerSet reads an answer set as the questions to ask, with each one's
// gold answers by question.
func answerSet(path string) ([]app.EvalQuery, map[string]eval.Question, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	set, err := eval.ReadQuestions(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	qs := make([]app.EvalQuery, len(set))
	gold := map[string]eval.Question{}
	for i, q := range set {
		qs[i] = app.EvalQuery{Query: q.Query, Relevant: q.Relevant}
		gold[q.Query] = q
	}
	return qs, gold, nil
}

// correct says whether answer is right for q.
func correct(q eval.Question, answer string) bool {
	if q.Unanswerable() {
		return eval.Abstains(answer)
	}
	return eval.Match(answer, q.Answers)
}

// sameDocPairs pairs up to n questions whose relevant document is the same.
func sameDocPairs(qs []app.EvalQuery, n int) [][2]string {
	byDoc := map[string][]string{}
	var docs []string
	for _, q := range qs {
		if len(q.Relevant) == 0 {
			continue
		}
		d := q.Relevant[0]
		if byDoc[d] == nil {
			docs = append(docs, d)
		}
		byDoc[d] = append(byDoc[d], q.Query)
	}
	var out [][2]string
	for _, d := range docs {
		if qs := byDoc[d]; len(qs) >= 2 && len(out) < n {
			out = append(out, [2]string{qs[0], qs[1]})
		}
	}
	return out
}

func sorted(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

func round2(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }

// cpuModel is the CPU's name as Linux reports it ("" elsewhere).
func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// maxAgain is how many cold questions the again scenario asks again: the
// runner keeps the states of about eight ~1,200-token prompts of the demo
// model.
const maxAgain = 4

// note is ": why" for a reason given, else "".
func note(why string) string {
	if why == "" {
		return ""
	}
	return " (" + why + ")"
}
