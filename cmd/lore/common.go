package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"lore/app"
	"lore/app/telemetry"
)

// appFlags are the flags every command that opens the library shares.
type appFlags struct {
	data, workspace         string
	model, fastModel        string
	draftModel              string
	speculate               int
	embedModel, rerankModel string
	chatURL, chatURLModel   string
	embedURL, embedURLModel string
	rerankURL, rerankModelN string
	json                    bool
	watch                   bool // keep workspaces current (long-running commands)
	warm                    bool // start the models at once (commands that answer)
}

func (f *appFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.data, "data", "", "data `folder` (default $LORE_DATA, else the per-user data folder)")
	fs.StringVar(&f.workspace, "workspace", "default", "workspace `name`")
	fs.StringVar(&f.model, "model", "", "chat model GGUF `file` for this run")
	fs.StringVar(&f.fastModel, "fast-model", "", "fast chat model GGUF `file` for this run: the router sends questions the main model would answer too slowly to it (Settings: route_ttft_ms, route_short_words)")
	fs.StringVar(&f.draftModel, "draft-model", "", "draft model GGUF `file` for this run: a smaller model with the chat model's vocabulary whose picks the chat model verifies (with --speculate)")
	fs.IntVar(&f.speculate, "speculate", 0, "speculative decoding for this run: up to `K` drafted tokens a step, by the --draft-model or else prompt lookup (Settings: speculate, spec_floor_pct)")
	fs.StringVar(&f.embedModel, "embed-model", "", "embedding model GGUF `file` for this run")
	fs.StringVar(&f.rerankModel, "rerank-model", "", "rerank model GGUF `file` for this run")
	fs.StringVar(&f.chatURL, "chat-url", "", "OpenAI-compatible server `URL` (http://host:port/v1) that answers instead of the local chat model, which stays as its fallback; questions and passages leave this machine. Key: $LORE_API_KEY or `lore key set`")
	fs.StringVar(&f.chatURLModel, "chat-url-model", "", "model `name` to ask the --chat-url server for")
	fs.StringVar(&f.embedURL, "embed-url", "", "OpenAI-compatible server `URL` that embeds instead of the local embedding model; the library's text leaves this machine. Key: $LORE_API_KEY or `lore key set`")
	fs.StringVar(&f.embedURLModel, "embed-url-model", "", "model `name` to ask the --embed-url server for")
	fs.StringVar(&f.rerankURL, "rerank-url", "", "server `URL` with llama-server's /v1/rerank that reranks instead of the local rerank model, which stays as its fallback; questions and retrieved passages leave this machine. Key: $LORE_API_KEY or `lore key set`")
	fs.StringVar(&f.rerankModelN, "rerank-url-model", "", "model `name` to ask the --rerank-url server for")
	fs.BoolVar(&f.json, "json", false, "print JSON")
}

// open opens the app with the flags' overrides.
func (f *appFlags) open(ctx context.Context, tel *telemetry.Telemetry) (*app.App, error) {
	cfg := app.Config{DataDir: f.data, ChatModel: f.model, FastChatModel: f.fastModel,
		DraftModel: f.draftModel, Speculate: f.speculate, EmbedModel: f.embedModel, RerankModel: f.rerankModel, Watch: f.watch, Warm: f.warm,
		ChatURL: f.chatURL, ChatURLModel: f.chatURLModel, EmbedURL: f.embedURL, EmbedURLModel: f.embedURLModel,
		RerankURL: f.rerankURL, RerankURLModel: f.rerankModelN, APIKey: os.Getenv(app.APIKeyEnv), Keyring: true}
	if tel != nil {
		cfg.Tracer, cfg.OnTrace = tel.Tracer, tel.OnTrace
	}
	return app.New(ctx, cfg)
}

// openTraced opens the app with telemetry (OTLP export when configured,
// metrics); close shuts both down.
func (f *appFlags) openTraced(ctx context.Context) (a *app.App, tel *telemetry.Telemetry, close func(), err error) {
	if tel, err = telemetry.New(ctx); err != nil {
		return nil, nil, nil, err
	}
	if a, err = f.open(ctx, tel); err != nil {
		tel.Shutdown(context.Background())
		return nil, nil, nil, err
	}
	return a, tel, func() { a.Close(); tel.Shutdown(context.Background()) }, nil
}

// parseArgs parses args, allowing flags after positional arguments
// (`lore ask "question" --json`).
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// bar renders a progress bar of width w.
func bar(done, total, w int) string {
	if total <= 0 {
		return "[" + strings.Repeat("·", w) + "]"
	}
	n := min(done*w/total, w)
	return "[" + strings.Repeat("█", n) + strings.Repeat("·", w-n) + "]"
}

func humanDur(s float64) string {
	switch {
	case s <= 0:
		return "—"
	case s < 60:
		return fmt.Sprintf("%.0fs", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", int(s)/60, int(s)%60)
	}
	return fmt.Sprintf("%dh%02dm", int(s)/3600, int(s)%3600/60)
}

// intList parses a comma-separated list of positive integers ("20,50,100").
func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a list of positive numbers", s)
		}
		out = append(out, n)
	}
	return out, nil
}
