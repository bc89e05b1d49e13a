package bench

import (
	"context"
	"errors"
	"testing"

	"lore/index/vector"
)

func TestVectors(t *testing.T) {
	r, err := Vectors(context.Background(), VectorConfig{N: 2000, Dim: 32, Queries: 50, Seed: 1,
		Sweep: []int{8}, SaveDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if r.N != 2000 || r.Dim != 32 || r.K != 10 || r.Options.M != vector.DefaultM {
		t.Errorf("config not reported: %+v", r)
	}
	if r.Recall < 0.95 || r.Recall > 1 || r.Build <= 0 || r.HNSW.P50 <= 0 || r.Exact.P99 < r.Exact.P50 {
		t.Errorf("implausible figures: %+v", r)
	}
	if len(r.Sweep) != 1 || r.Sweep[0].EfSearch != 8 || r.Sweep[0].Recall <= 0 {
		t.Errorf("sweep: %+v", r.Sweep)
	}
	if r.FileBytes < 2000*32*4 || r.Load <= 0 {
		t.Errorf("file figures: %d bytes, load %s", r.FileBytes, r.Load)
	}
	if _, err := Vectors(context.Background(), VectorConfig{}); err == nil {
		t.Error("Bench with N=0 succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Vectors(ctx, VectorConfig{N: 5000, Dim: 8}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Bench: %v", err)
	}
}
