package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"lore/app/mcp"
	"lore/internal/stdio"
)

// mcpCmd serves the library to an MCP client over stdin and stdout: the
// client starts `lore mcp` and speaks JSON-RPC on its pipes.
func mcpCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	// Not warm: desktop clients start their MCP servers with the client,
	// used or not; the chat model loads at the first ask.
	f := appFlags{}
	f.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("mcp takes no arguments, only flags (got %q): the client speaks to it on stdin and stdout", strings.Join(pos, " "))
	}
	// Standard output carries the protocol and nothing else: from here on
	// anything that prints to it, Go or C (the models' loaders), prints to
	// standard error, where the client keeps the logs.
	proto, err := stdio.ProtocolOutput()
	if err != nil {
		return err
	}
	defer proto.Close()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	a, tel, closeApp, err := f.openTraced(ctx)
	if err != nil {
		return err
	}
	defer closeApp()
	s := mcp.New(a, mcp.Options{Logger: log, Tracer: tel.Tracer, Workspace: f.workspace, Version: version()})
	fmt.Fprintf(os.Stderr, "lore mcp: serving the library in %s over stdio (workspace %q unless a call names one); read-only\n",
		a.DataDir(), f.workspace)
	return mcp.ServeStdio(ctx, s, os.Stdin, proto)
}

// version is this build's version as Go recorded it (the module's, or
// the commit's with a "+dirty" mark), "dev" when it recorded none.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
