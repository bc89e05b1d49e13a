package main

import (
	"context"
	"fmt"
)

func benchCmd(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("bench: which one? engine, retrieval, load or ttft")
	}
	switch args[0] {
	case "engine":
		return benchEngine(ctx, args[1:])
	case "retrieval":
		return benchRetrieval(ctx, args[1:])
	case "load":
		return benchLoad(ctx, args[1:])
	case "ttft":
		return benchTTFT(ctx, args[1:])
	}
	return fmt.Errorf("bench: unknown benchmark %q (engine, retrieval, load or ttft)", args[0])
}
