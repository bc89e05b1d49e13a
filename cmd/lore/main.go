// Command lore is Lore's headless CLI and server: index folders, search
// them, ask questions with an on-device model, and serve the web UI.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"lore/app"
)

type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

var commands = map[string]command{
	"synth-model": {"write a synthetic GGUF model for tests and benchmarks", synthModel},
	"bench":       {"benchmarks: bench engine|retrieval|load|ttft [--json]", benchCmd},
	"demo":        {"index the sample library and stream an answer with its timings (the real models of `lore models fetch`, else synthetic ones)", demo},
	"index":       {"index folders: index [--workspace W] [--embed-model F] PATH...", indexCmd},
	"search":      {"search the library: search [--json] \"query\"", searchCmd},
	"ask":         {"ask a question: ask [--model F] [--json] \"question\"", askCmd},
	"traces":      {"recent traces and per-stage percentiles", tracesCmd},
	"serve":       {"serve the HTTP API and web UI on loopback", serveCmd},
	"mcp":         {"serve the library to an MCP client over stdio (read-only tools: search, ask, list_workspaces, index_status, get_passage)", mcpCmd},
	"eval":        {"quality: eval retrieval|answers --queries FILE.jsonl", evalCmd},
	"models":      {"model files found, the ones in use and their runner build: models [--json]; models fetch [NAME...]", modelsCmd},
	"key":         {"the remote backends' API key in the OS keyring: key set|delete|status", keyCmd},
	"cpu":         {"CPU features and the model runner build in use: cpu [--json|--best]", cpuCmd},
}

func main() {
	app.MaybeServeWorker(os.Args) // a parse worker child process serves and exits here
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// run runs one command line (without the program name) and returns its
// exit status: 0, 1 when the command failed, 2 for an unknown command.
func run(ctx context.Context, args []string) int {
	if len(args) < 1 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage()
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "lore: unknown command %q\n\n", args[0])
		usage()
		return 2
	}
	if err := cmd.run(ctx, args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "lore:", err)
		return 1
	}
	return 0
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: lore COMMAND [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-12s %s\n", n, commands[n].summary)
	}
}
