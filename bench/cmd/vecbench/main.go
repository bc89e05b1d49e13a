// Command vecbench measures Lore's vector indexes on synthetic clustered
// embeddings: HNSW build time, search latency of HNSW and exact search, and
// HNSW recall against exact search.
//
//	go run ./index/vector/cmd/vecbench -n 1000,5000,10000,20000,50000,100000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"lore/bench"
	"lore/index/vector"
)

func main() {
	sizes := flag.String("n", "20000", "comma-separated corpus sizes")
	dim := flag.Int("dim", 384, "vector dimension")
	queries := flag.Int("q", 300, "queries per size")
	m := flag.Int("m", 0, "HNSW M (0: default)")
	efc := flag.Int("efc", 0, "HNSW efConstruction (0: default)")
	efs := flag.String("efs", "", "comma-separated further HNSW efSearch values to sweep")
	workers := flag.Int("workers", 0, "build goroutines (0: GOMAXPROCS)")
	seed := flag.Uint64("seed", 1, "corpus seed")
	save := flag.String("save", "", "folder in which to time saving and loading the index")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	for _, n := range ints(*sizes) {
		r, err := bench.Vectors(ctx, bench.VectorConfig{N: n, Dim: *dim, Queries: *queries, Seed: *seed,
			Options: vector.Options{M: *m, EfConstruction: *efc, Workers: *workers}, Sweep: ints(*efs), SaveDir: *save})
		if err != nil {
			fmt.Fprintln(os.Stderr, "vecbench:", err)
			os.Exit(1)
		}
		fmt.Println(r)
	}
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			fmt.Fprintf(os.Stderr, "vecbench: bad number %q\n", f)
			os.Exit(2)
		}
		out = append(out, n)
	}
	return out
}
