package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"lore/app"
)

func indexCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("index", flag.ContinueOnError)
	var f appFlags
	f.register(fs)
	paths, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	a, err := f.open(ctx, nil)
	if err != nil {
		return err
	}
	defer a.Close()
	tty := !f.json && isTerminal(os.Stderr)
	last := time.Time{}
	sum, err := a.Index(ctx, f.workspace, paths, func(p app.Progress) {
		if f.json {
			return
		}
		if !tty && time.Since(last) < 2*time.Second && p.Phase != app.PhaseDone && p.Error == nil {
			return
		}
		last = time.Now()
		if p.Error != nil {
			fmt.Fprintf(os.Stderr, "\r\033[K  ! %s: %s\n", p.Error.Path, p.Error.Reason)
		}
		done, total, unit := p.FilesDone, p.FilesTotal, "files"
		if p.Phase == app.PhaseEmbed {
			done, total, unit = p.Chunks, p.ChunksTotal, "chunks"
		}
		line := fmt.Sprintf("%-6s %s %d/%d %s · %.0f files/s · ETA %s  %s", p.Phase, bar(done, total, 24),
			done, total, unit, p.FilesPerS, humanDur(p.ETAs), shorten(p.Current, 40))
		if tty {
			fmt.Fprintf(os.Stderr, "\r\033[K%s", line)
		} else {
			fmt.Fprintln(os.Stderr, line)
		}
	})
	if tty {
		fmt.Fprintln(os.Stderr)
	}
	if f.json {
		if perr := printJSON(sum); perr != nil {
			return perr
		}
		return err
	}
	fmt.Printf("%d files: %d indexed, %d unchanged, %d skipped, %d deleted, %d renamed · %d chunks, %d embedded · %.1fs\n",
		sum.Files, sum.Indexed, sum.Unchanged, sum.Skipped, sum.Deleted, sum.Renamed, sum.Chunks, sum.Embedded, sum.Seconds)
	for _, e := range sum.Errors {
		fmt.Printf("  error: %s: %s\n", e.Path, e.Reason)
	}
	for i, k := range sum.SkippedFiles {
		if i == 10 {
			fmt.Printf("  … and %d more skipped (lore index --json lists them)\n", len(sum.SkippedFiles)-i)
			break
		}
		fmt.Printf("  skipped: %s: %s\n", k.Path, k.Reason)
	}
	return err
}

func searchCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("search", flag.ContinueOnError)
	var f appFlags
	f.register(fs)
	k := fs.Int("k", 8, "passages to show")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return fmt.Errorf("search: what should I look for? (lore search \"query\")")
	}
	a, err := f.open(ctx, nil)
	if err != nil {
		return err
	}
	defer a.Close()
	res, err := a.Search(ctx, f.workspace, strings.Join(pos, " "), app.SearchOptions{TopK: *k})
	if err != nil {
		return err
	}
	if f.json {
		return printJSON(res)
	}
	if res.Degraded != "" {
		fmt.Printf("(%s retrieval: %s)\n", res.Mode, res.Degraded)
	}
	for i, p := range res.Passages {
		loc := p.Document
		if p.Heading != "" {
			loc += " › " + p.Heading
		}
		if p.Page > 0 {
			loc += fmt.Sprintf(" p.%d", p.Page)
		} else if p.LineStart > 0 {
			loc += fmt.Sprintf(" L%d–%d", p.LineStart, p.LineEnd)
		}
		fmt.Printf("%d. %s\n   bm25 %.3f (#%d) · vector %.3f (#%d) · fused %.4f\n   %s\n\n", i+1, loc,
			p.Scores.BM25, p.Scores.BM25Rank, p.Scores.Vector, p.Scores.VectorRank, p.Scores.Fused, shorten(oneLine(p.Text), 160))
	}
	t := res.Stages
	fmt.Printf("%s retrieval · embed %.2f ms · vector %.2f ms ‖ bm25 %.2f ms · fuse %.2f ms · total %.2f ms%s\n",
		res.Mode, t[app.StageEmbed], t[app.StageVector], t[app.StageBM25], t["fuse_ms"], t[app.StageTotal], cacheNote(res))
	return nil
}

func cacheNote(r app.SearchResult) string {
	switch {
	case r.CacheHit:
		return " · cached result"
	case r.EmbedCacheHit:
		return " · cached query embedding"
	}
	return ""
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
