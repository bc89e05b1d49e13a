package main

import (
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

// scenario is one way of answering the same questions: the settings it
// runs under and whether the question is typed first (read ahead).
type scenario struct {
	name, about string
	typed       bool
	route       string // "fast": every question to the fast chat model
	set         func(s *app.Settings, full int)
	stitch      bool // passages' KV saved by a first pass, stitched in the graded one
}

// scenarios, in the order they run; "full" first: the others are compared
// with its answers.
var scenarios = []scenario{
	{name: "full", about: "cold, the top-K passages read whole (no budget, no cut)",
		set: func(s *app.Settings, full int) { s.ContextTokens, s.RouteTTFTMs = full, 0 }},
	{name: "auto", about: "cold, today's automatic budget (about a second of prefill)",
		set: func(s *app.Settings, _ int) { s.ContextTokens = 0 }},
	{name: "typed", about: "typed at human pace, read ahead, default budgets (may cut or leave passages out)", typed: true,
		set: func(s *app.Settings, _ int) { s.ContextTokens = 0 }},
	{name: "typed-full", about: "typed at human pace, read ahead, the top-K passages whole", typed: true,
		set: func(s *app.Settings, full int) { s.ContextTokens, s.RouteTTFTMs = full, 0 }},
	{name: "cut", about: "typed with a 250 ms first-token budget: the best passage cut, late passages left out", typed: true,
		set: func(s *app.Settings, full int) { s.ContextTokens, s.RouteTTFTMs = full, 250 }},
	{name: "stitch0", about: "cold, full context, passages stitched from saved KV, repair k = 0", stitch: true,
		set: func(s *app.Settings, full int) { s.ContextTokens, s.RouteTTFTMs, s.PassageRepair = full, 0, 0 }},
	{name: "stitch4", about: "as stitch0 with k = 4", stitch: true,
		set: func(s *app.Settings, full int) { s.ContextTokens, s.RouteTTFTMs, s.PassageRepair = full, 0, 4 }},
	{name: "stitch16", about: "as stitch0 with k = 16", stitch: true,
		set: func(s *app.Settings, full int) { s.ContextTokens, s.RouteTTFTMs, s.PassageRepair = full, 0, 16 }},
	{name: "fast", about: "cold, full context, every question to the fast chat model (--fast-model)", route: "fast",
		set: func(s *app.Settings, full int) { s.ContextTokens, s.RouteTTFTMs = full, 0 }},
}

// graded is one answer and its grades.
type graded struct {
	Query    string  `json:"query"`
	Kind     string  `json:"kind"`
	Answer   string  `json:"answer"`
	Correct  bool    `json:"correct"`   // a gold phrase occurs (answerable questions)
	Abstains bool    `json:"abstains"`  // it declines to answer
	InPrompt bool    `json:"in_prompt"` // a relevant document was among the passages
	Cited    int     `json:"cited"`     // sources it cites that exist
	CitedRel int     `json:"cited_relevant"`
	TTFTMs   float64 `json:"ttft_ms"`
	Prompt   int     `json:"prompt_tokens"`
	Prefetch string  `json:"prefetch,omitempty"`
	Cut      int     `json:"cut_tokens,omitempty"`
	Late     int     `json:"late_passages,omitempty"`
	Stitch   string  `json:"stitch,omitempty"`
	Support  float64 `json:"support,omitempty"`
	head     string  // the first 32 tokens, for agreement with "full"
}

// answerRow is one scenario's aggregates.
type answerRow struct {
	Scenario          string    `json:"scenario"`
	About             string    `json:"about"`
	Questions         int       `json:"questions"`
	Accuracy          float64   `json:"accuracy"`           // answerable questions answered with a gold phrase
	CitationPrecision float64   `json:"citation_precision"` // cited sources that are relevant documents (answerable)
	PromptRecall      float64   `json:"prompt_recall"`      // answerable questions whose prompt held a relevant document
	Abstention        float64   `json:"abstention"`         // unanswerable questions declined
	FalseAbstention   float64   `json:"false_abstention"`   // answerable questions declined
	AgreeTokens       float64   `json:"agree_first_tokens"` // same first 32 tokens as "full"
	AgreeVerdict      float64   `json:"agree_verdict"`      // same gold verdict as "full"
	TTFTP50           float64   `json:"ttft_p50_ms"`
	TTFTP95           float64   `json:"ttft_p95_ms"`
	PromptP50         float64   `json:"prompt_tokens_p50"`
	Note              string    `json:"note,omitempty"`
	Answers           []*graded `json:"answers"`
}

func evalAnswers(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eval answers", flag.ContinueOnError)
	var f appFlags
	f.register(fs)
	queries := fs.String("queries", "", "answer set: JSON lines of {\"query\", \"answers\": [gold phrases], \"relevant\": [paths], \"kind\"}")
	folder := fs.String("index", "", "index this `folder` into the workspace first (skipped when already current)")
	only := fs.String("only", "full,auto,typed,typed-full,cut,stitch0,stitch4,stitch16,fast", "scenarios to run, comma-separated (fast needs --fast-model)")
	limit := fs.Int("limit", 0, "ask only the first `N` questions (0: all)")
	maxTokens := fs.Int("max-tokens", 96, "tokens generated per answer")
	full := fs.Int("full-tokens", 3072, "passage token budget of the full-context scenarios (the top-K passages whole)")
	cps := fs.Float64("cps", 8, "typing speed of the typed scenarios, characters per second")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	if *queries == "" {
		return fmt.Errorf("eval answers: --queries FILE is required (for example eval/answers-sample.jsonl)")
	}
	file, err := os.Open(*queries)
	if err != nil {
		return fmt.Errorf("eval answers: --queries: %w", err)
	}
	qs, err := eval.ReadQuestions(file)
	file.Close()
	if err != nil {
		return fmt.Errorf("eval answers: %s: %w", *queries, err)
	}
	if *limit > 0 && *limit < len(qs) {
		qs = qs[:*limit]
	}
	var run []scenario
	for _, name := range strings.Split(*only, ",") {
		i := slices.IndexFunc(scenarios, func(s scenario) bool { return s.name == name })
		switch {
		case i < 0:
			return fmt.Errorf("eval answers: no scenario %q", name)
		case name == "fast" && f.fastModel == "":
			fmt.Fprintln(os.Stderr, "eval answers: skipping scenario fast: no --fast-model")
			continue
		}
		run = append(run, scenarios[i])
	}
	f.warm = true
	a, err := f.open(ctx, nil)
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.WaitWarm(ctx); err != nil {
		return err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	if *folder != "" {
		logf("indexing %s…", *folder)
		if _, err := a.Index(ctx, f.workspace, []string{*folder}, nil); err != nil {
			return err
		}
	}
	saved := a.Settings()
	defer a.SaveSettings(context.WithoutCancel(ctx), saved)

	var rows []*answerRow
	var ref []*graded // "full"'s answers, when it ran
	for _, sc := range run {
		s := saved
		s.MaxTokens, s.PassageKV = *maxTokens, false
		sc.set(&s, *full)
		if err := a.SaveSettings(ctx, s); err != nil {
			return fmt.Errorf("scenario %s: %w", sc.name, err)
		}
		ask := func(q eval.Question) (*graded, error) {
			if sc.typed {
				typeAhead(ctx, a, q.Query, f.workspace, *cps)
			}
			return askGraded(ctx, a, app.AskRequest{Question: q.Query, Workspace: f.workspace, Route: sc.route}, q)
		}
		if sc.stitch {
			s.PassageKV = true
			if err := a.SaveSettings(ctx, s); err != nil {
				return fmt.Errorf("scenario %s: %w", sc.name, err)
			}
			logf("%s: saving the passages' KV…", sc.name)
			for _, q := range qs {
				if _, err := ask(q); err != nil {
					return err
				}
			}
			if err := a.WaitPassages(ctx); err != nil {
				return err
			}
		}
		row := &answerRow{Scenario: sc.name, About: sc.about, Questions: len(qs)}
		for i, q := range qs {
			g, err := ask(q)
			if err != nil {
				return fmt.Errorf("scenario %s, %q: %w", sc.name, q.Query, err)
			}
			row.Answers = append(row.Answers, g)
			verdict := "wrong"
			switch {
			case q.Unanswerable() && g.Abstains:
				verdict = "declined (right)"
			case q.Unanswerable():
				verdict = "answered (should decline)"
			case g.Correct:
				verdict = "right"
			}
			logf("%s %2d/%d %6.0f ms %4d tok  %-26s %q → %q", sc.name, i+1, len(qs), g.TTFTMs, g.Prompt, verdict, q.Query, shorten(oneLine(g.Answer), 100))
		}
		row.grade(qs, ref)
		if sc.name == "full" {
			ref = row.Answers
		}
		rows = append(rows, row)
	}
	if f.json {
		return printJSON(map[string]any{"queries": *queries, "questions": len(qs), "model": filepath.Base(a.Settings().ChatModel),
			"cpu": cpuModel(), "scenarios": rows})
	}
	fmt.Printf("%d questions (%s), chat model %s, %s\n\n", len(qs), filepath.Base(*queries), filepath.Base(a.Settings().ChatModel), cpuModel())
	fmt.Printf("%-11s %8s %8s %8s %8s %8s %7s %7s %9s %9s %7s  %s\n", "scenario", "accuracy", "cite-prec", "in-prompt",
		"abstain", "false-ab", "agree32", "agree", "ttft p50", "ttft p95", "prompt", "note")
	for _, r := range rows {
		fmt.Printf("%-11s %8s %8s %8s %8s %8s %7s %7s %9.0f %9.0f %7.0f  %s\n", r.Scenario, pct(r.Accuracy), pct(r.CitationPrecision),
			pct(r.PromptRecall), pct(r.Abstention), pct(r.FalseAbstention), pct(r.AgreeTokens), pct(r.AgreeVerdict),
			r.TTFTP50, r.TTFTP95, r.PromptP50, r.Note)
	}
	return nil
}

// typeAhead replays q typed at cps characters a second, sending the drafts
// the UI would, and returns at Enter.
func typeAhead(ctx context.Context, a *app.App, q, workspace string, cps float64) {
	sends, enter := bench.Typing(q, time.Duration(float64(time.Second)/cps))
	start := time.Now()
	for _, d := range sends {
		time.Sleep(time.Until(start.Add(d.At)))
		go a.Prefetch(ctx, app.PrefetchRequest{Draft: d.Draft, Workspace: workspace, ClientID: "eval"})
	}
	time.Sleep(time.Until(start.Add(enter)))
}

// askGraded asks one question in a new chat and grades the answer.
func askGraded(ctx context.Context, a *app.App, req app.AskRequest, q eval.Question) (*graded, error) {
	var text strings.Builder
	var head string
	tokens := 0
	var sources app.Sources
	tr, err := a.Ask(ctx, req, func(ev app.Event) error {
		switch ev := ev.(type) {
		case app.Sources:
			sources = ev
		case app.Token:
			text.WriteString(ev.Text)
			if tokens++; tokens == 32 {
				head = text.String()
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	g := &graded{Query: q.Query, Kind: q.Kind, Answer: strings.TrimSpace(text.String()), TTFTMs: tr.Stages[app.StageTTFT],
		Prompt: tr.PromptTokens, Prefetch: tr.Prefetch, Late: tr.LatePassages, Stitch: tr.Stitch}
	if head == "" {
		head = text.String()
	}
	g.head = head
	if tr.Cut != nil {
		g.Cut = tr.Cut.Tokens
	}
	if tr.Support != nil {
		g.Support = *tr.Support
	}
	g.Correct = !q.Unanswerable() && eval.Match(g.Answer, q.Answers)
	g.Abstains = eval.Abstains(g.Answer)
	relevant := func(doc string) bool {
		return slices.ContainsFunc(q.Relevant, func(r string) bool { return filepath.ToSlash(filepath.Clean(r)) == doc })
	}
	for _, s := range sources {
		if relevant(s.Document) {
			g.InPrompt = true
		}
	}
	for _, n := range eval.Citations(g.Answer) {
		if i := slices.IndexFunc(sources, func(s app.Source) bool { return s.N == n }); i >= 0 {
			g.Cited++
			if relevant(sources[i].Document) {
				g.CitedRel++
			}
		}
	}
	return g, nil
}

// grade fills in the aggregates; ref, when given, is "full"'s answers to
// the same questions.
func (r *answerRow) grade(qs []eval.Question, ref []*graded) {
	var answerable, unanswerable, correct, inPrompt, declined, falseDecl, cited, citedRel, agreeT, agreeV int
	var ttft, prompt []float64
	cuts, late, stitched, refused := 0, 0, 0, 0
	for i, g := range r.Answers {
		ttft = append(ttft, g.TTFTMs)
		prompt = append(prompt, float64(g.Prompt))
		if qs[i].Unanswerable() {
			unanswerable++
			if g.Abstains {
				declined++
			}
		} else {
			answerable++
			if g.Correct {
				correct++
			}
			if g.InPrompt {
				inPrompt++
			}
			if g.Abstains {
				falseDecl++
			}
			cited += g.Cited
			citedRel += g.CitedRel
		}
		if ref != nil {
			if g.head == ref[i].head {
				agreeT++
			}
			if g.Correct == ref[i].Correct && g.Abstains == ref[i].Abstains {
				agreeV++
			}
		}
		if g.Cut > 0 {
			cuts++
		}
		late += g.Late
		switch g.Stitch {
		case "on":
			stitched++
		case "refused":
			refused++
		}
	}
	share := func(n, of int) float64 {
		if of == 0 {
			return -1
		}
		return float64(n) / float64(of)
	}
	r.Accuracy, r.PromptRecall, r.FalseAbstention = share(correct, answerable), share(inPrompt, answerable), share(falseDecl, answerable)
	r.Abstention, r.CitationPrecision = share(declined, unanswerable), share(citedRel, cited)
	r.AgreeTokens, r.AgreeVerdict = -1, -1
	if ref != nil {
		r.AgreeTokens, r.AgreeVerdict = share(agreeT, len(qs)), share(agreeV, len(qs))
	}
	r.TTFTP50, r.TTFTP95 = pctOf(sorted(ttft), 0.5), pctOf(sorted(ttft), 0.95)
	r.PromptP50 = pctOf(sorted(prompt), 0.5)
	var notes []string
	if cuts > 0 || late > 0 {
		notes = append(notes, fmt.Sprintf("%d cut, %d passages left out", cuts, late))
	}
	if stitched > 0 || refused > 0 {
		notes = append(notes, fmt.Sprintf("stitched %d, refused %d", stitched, refused))
	}
	r.Note = strings.Join(notes, "; ")
}

// pct prints a share as a percentage; a negative share has no value.
func pct(x float64) string {
	if x < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*x)
}
