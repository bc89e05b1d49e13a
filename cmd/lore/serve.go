package main

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"

	"lore/app/server"
	"lore/frontend"
)

func serveCmd(ctx context.Context, args []string) error {
	fset := flag.NewFlagSet("serve", flag.ContinueOnError)
	f := appFlags{watch: true, warm: true}
	f.register(fset)
	addr := fset.String("addr", "127.0.0.1:8765", "loopback `address` to listen on (port 0 picks a free one)")
	if _, err := parseArgs(fset, args); err != nil {
		return err
	}
	ln, err := server.Listen(*addr)
	if err != nil {
		return err
	}
	a, tel, closeApp, err := f.openTraced(ctx)
	if err != nil {
		return err
	}
	defer closeApp()
	token, err := server.LoadToken(a.DataDir())
	if err != nil {
		return err
	}
	var ui fs.FS
	if sub, err := fs.Sub(frontend.Dist, "dist"); err == nil {
		if _, err := fs.Stat(sub, "index.html"); err == nil {
			ui = sub
		}
	}
	s := server.New(a, token, ln, server.Options{UI: ui, Metrics: tel.Metrics})
	fmt.Println(s.URL(ln)) // first line: the URL to open, with the token
	fmt.Fprintf(os.Stderr, "data in %s; Ctrl-C stops\n", a.DataDir())
	return s.Serve(ctx, ln)
}
