package main

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"lore/app/server"
	"lore/frontend"
)

func serveCmd(ctx context.Context, args []string) error {
	fset := flag.NewFlagSet("serve", flag.ContinueOnError)
	f := appFlags{watch: true, warm: true}
	f.register(fset)
	addr := fset.String("addr", "127.0.0.1:8765", "loopback `address` to listen on (port 0 picks a free one)")
	keep := fset.Bool("keep-token", false, "reuse the previous run's token (saved in the data folder) instead of a fresh one")
	if _, err := parseArgs(fset, args); err != nil {
		return err
	}
	ln, err := server.Listen(*addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	a, tel, closeApp, err := f.openTraced(ctx)
	if err != nil {
		return err
	}
	defer closeApp()
	token, err := serveToken(a.DataDir(), *keep)
	if err != nil {
		return err
	}
	openai, err := server.LoadOpenAIToken(a.DataDir())
	if err != nil {
		return err
	}
	var ui fs.FS
	if sub, err := fs.Sub(frontend.Dist, "dist"); err == nil {
		if _, err := fs.Stat(sub, "index.html"); err == nil {
			ui = sub
		}
	}
	s := server.New(a, token, ln, server.Options{UI: ui, Metrics: tel.Metrics, OpenAIToken: openai, Tracer: tel.Tracer,
		Workspace: f.workspace, Version: version()})
	fmt.Println(s.URL(ln)) // first line: the URL to open, with the token
	fmt.Fprintf(os.Stderr, "OpenAI-compatible API (chat, embeddings, rerank and models only): base URL %s, API key %s (kept in %s)\n",
		s.OpenAIBase(ln), openai, filepath.Join(a.DataDir(), server.OpenAITokenFile))
	fmt.Fprintf(os.Stderr, "MCP (streamable HTTP, read-only): %s with the header \"Authorization: Bearer TOKEN\", the URL's token\n", s.MCPURL(ln))
	fmt.Fprintf(os.Stderr, "data in %s; Ctrl-C stops\n", a.DataDir())
	return s.Serve(ctx, ln)
}

// serveToken is the full token for this run: $LORE_TOKEN when set, the
// previous run's with keep, else a fresh one, so that a URL seen once
// (shell history, a screen share) stops working at the next start.
func serveToken(dataDir string, keep bool) (string, error) {
	if t := os.Getenv("LORE_TOKEN"); t != "" {
		if err := server.SaveToken(dataDir, t); err != nil {
			return "", fmt.Errorf("$LORE_TOKEN: %w", err)
		}
		return t, nil
	}
	if keep {
		return server.LoadToken(dataDir)
	}
	return server.RotateToken(dataDir)
}
