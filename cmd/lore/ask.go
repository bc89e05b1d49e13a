package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"lore/app"
)

func askCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ask", flag.ContinueOnError)
	f := appFlags{warm: true}
	f.register(fs)
	chat := fs.Int64("chat", 0, "continue chat `id`")
	route := fs.String("route", app.RouteAuto, "chat model to answer: auto (the router's rules), main or fast")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	q := strings.TrimSpace(strings.Join(pos, " "))
	if q == "" {
		return fmt.Errorf("ask: what is the question? (lore ask \"question\")")
	}
	a, _, closeApp, err := f.openTraced(ctx)
	if err != nil {
		return err
	}
	defer closeApp()
	// The model loads and warms its system prefix at start; a long-running
	// app does this once, so the question's clock starts after it.
	fmt.Fprint(os.Stderr, "loading model… ")
	start := time.Now()
	if err := a.WaitWarm(ctx); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%.1fs\n\n", time.Since(start).Seconds())
	// With --json stdout holds the trace alone; the answer streams to stderr.
	out := io.Writer(os.Stdout)
	if f.json {
		out = os.Stderr
	}
	tr, sources, err := streamAnswer(ctx, a, app.AskRequest{Question: q, Workspace: f.workspace, ChatID: *chat, Route: *route}, out)
	if tr == nil {
		return err
	}
	if f.json {
		if perr := printJSON(tr); perr != nil {
			return perr
		}
		return err
	}
	printSources(sources)
	printTrace(tr)
	return err
}

// streamAnswer asks a question, printing the answer to out as it streams,
// and returns the trace and the sources.
func streamAnswer(ctx context.Context, a *app.App, req app.AskRequest, out io.Writer) (*app.Trace, []app.Source, error) {
	var sources []app.Source
	tr, err := a.Ask(ctx, req, func(ev app.Event) error {
		switch ev := ev.(type) {
		case app.Token:
			fmt.Fprint(out, ev.Text)
		case app.Sources:
			sources = ev
		}
		return nil
	})
	fmt.Fprintln(out)
	return tr, sources, err
}

// printSources lists the sources an answer cites, with their headings.
func printSources(sources []app.Source) {
	if len(sources) == 0 {
		return
	}
	fmt.Println("\nSources:")
	for _, s := range sources {
		loc := s.Document
		if s.Heading != "" {
			loc += " › " + s.Heading
		}
		fmt.Printf("  [%d] %s\n", s.N, loc)
	}
}

// stageOrder is the order stages are shown in, as on the latency panel.
var stageOrder = []string{app.StageEmbed, app.StageVector, app.StageBM25, app.StageRetrieval,
	app.StageRerank, app.StageAssemble, app.StageQueue, app.StageRunnerRTT, app.StageTokenize, app.StageRestore, app.StagePrefill,
	app.StageFirstDecode, app.StageLLMTTFT, app.StageFlush, app.StageTTFT, app.StageDecode, app.StageTotal}

func printTrace(t *app.Trace) {
	fmt.Printf("\n%-20s %10s %10s\n", "stage", "start ms", "ms")
	for _, s := range stageOrder {
		if v, ok := t.Stages[s]; ok {
			fmt.Printf("%-20s %10.1f %10.1f\n", strings.TrimSuffix(s, "_ms"), t.StageStarts[s], v)
		}
	}
	fmt.Printf("\nprompt %d tokens (%d cached, %d evaluated) · %d passages · %s retrieval · decode %.1f tok/s\n",
		t.PromptTokens, t.CachedTokens, t.EvalTokens, t.ContextChunks, t.RetrievalMode, t.DecodeTokS)
	if t.FallbackLevel > 0 {
		fmt.Printf("fallback level %d: %s\n", t.FallbackLevel, t.FallbackReason)
	}
	fmt.Printf("route %s · version %s · request %s\n", t.Route, t.VersionID, t.RequestID)
	if t.RouteReason != "" {
		fmt.Printf("%s model: %s\n", t.RouteRole, t.RouteReason)
	}
	if s := supportText(t); s != "" {
		fmt.Println(s)
	}
	if t.SpecNote != "" {
		fmt.Printf("speculation %s", t.SpecNote)
		if t.Drafted > 0 {
			fmt.Printf(" · %d of %d drafted tokens kept", t.Accepted, t.Drafted)
		}
		if t.DraftAcceptRate != nil {
			fmt.Printf(" · route's acceptance %.0f%%", 100**t.DraftAcceptRate)
		}
		fmt.Println()
	}
}

// supportText says how well the answer is backed by its passages
// (app.CheckSupport): "support 4/5 sentences (80%)"; "" without a score.
func supportText(t *app.Trace) string {
	if t.Support == nil {
		return ""
	}
	s := fmt.Sprintf("support %d/%d sentences (%.0f%%)", t.SupportedSentences, t.CheckedSentences, 100**t.Support)
	if t.UncitedSentences > 0 {
		s += fmt.Sprintf(" · %d uncited", t.UncitedSentences)
	}
	return s
}

func tracesCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("traces", flag.ContinueOnError)
	var f appFlags
	f.register(fs)
	window := fs.String("window", "24h", "percentile window: 15m, 1h, 24h, 7d or all")
	limit := fs.Int("limit", 10, "recent traces to list")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	a, err := app.New(ctx, app.Config{DataDir: f.data})
	if err != nil {
		return err
	}
	defer a.Close()
	recent, err := a.Traces(ctx, *limit)
	if err != nil {
		return err
	}
	stats, err := a.Stats(ctx, *window)
	if err != nil {
		return err
	}
	if f.json {
		return printJSON(map[string]any{"recent": recent, "stats": stats})
	}
	fmt.Printf("%d recent traces\n", len(recent))
	for _, raw := range recent {
		var t app.Trace
		if json.Unmarshal(raw, &t) != nil {
			continue
		}
		fmt.Printf("  %s  %s  ttft %7.1f ms  total %8.1f ms  fallback %d  %s\n", t.Received.Format(time.DateTime),
			t.RequestID, t.Stages[app.StageTTFT], t.Stages[app.StageTotal], t.FallbackLevel, shorten(t.Question, 50))
	}
	fmt.Printf("\nper-stage percentiles over %s (%d traces)\n%-20s %6s %10s %10s %10s\n", *window, stats.N, "stage", "n", "p50", "p95", "p99")
	names := make([]string, 0, len(stats.Stages))
	for n := range stats.Stages {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return rank(names[i]) < rank(names[j]) })
	for _, n := range names {
		p := stats.Stages[n]
		fmt.Printf("%-20s %6d %10.1f %10.1f %10.1f\n", strings.TrimSuffix(n, "_ms"), p.N, p.P50, p.P95, p.P99)
	}
	for b, s := range stats.ByBucket {
		fmt.Printf("prompt %-10s n=%-4d ttft p50 %.1f p95 %.1f p99 %.1f\n", b, s.N, s.TTFT.P50, s.TTFT.P95, s.TTFT.P99)
	}
	for l, s := range stats.ByFallback {
		fmt.Printf("fallback %-8s n=%-4d ttft p50 %.1f p95 %.1f p99 %.1f\n", l, s.N, s.TTFT.P50, s.TTFT.P95, s.TTFT.P99)
	}
	if s := stats.Support; s.N > 0 {
		fmt.Printf("support mean %.0f%% over %d answers · %d (%.0f%%) under %.0f%%\n", 100*s.Mean, s.N, s.Low, 100*s.LowRate, 100*app.LowSupport)
	}
	return nil
}

func rank(stage string) int {
	for i, s := range stageOrder {
		if s == stage {
			return i
		}
	}
	return len(stageOrder)
}
