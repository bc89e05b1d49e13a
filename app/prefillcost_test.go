package app

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"lore/engine"
	"lore/engine/synth"
	"lore/store"
)

func TestPrefillCost(t *testing.T) {
	// ms to read n tokens from start when each costs a + b·position.
	cost := func(a, b float64, start, n int) float64 { return a*float64(n) + b*positions(start, n) }
	type read struct{ start, n int }
	tests := []struct {
		name    string
		a, b    float64
		seen    []read
		start   int
		ms      float64
		want    int // tokens readable from start in ms (±1)
		assumed bool
	}{
		{"fitted from reads at several positions", 2.6, 0.0015,
			[]read{{0, 86}, {86, 700}, {500, 200}, {86, 650}, {300, 300}, {700, 100}},
			650, 850, 0, false},
		{"reads from one position: the assumed slope", 3, 0.002,
			[]read{{100, 300}, {100, 300}, {100, 300}},
			100, 900, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c prefillCost
			if n := c.tokens(0, 1000); n != -1 {
				t.Fatalf("no prefill seen: %d tokens, want -1 (unknown)", n)
			}
			for _, r := range tt.seen {
				c.add(r.start, r.n, cost(tt.a, tt.b, r.start, r.n))
			}
			a, b, _ := c.coef()
			if tt.assumed {
				if math.Abs(b-a/doubleAt) > 1e-12 {
					t.Errorf("b = %g from reads at one position, want a/doubleAt = %g", b, a/doubleAt)
				}
				// The average: reading the same span again is priced right.
				if got, want := c.tokens(tt.start, cost(tt.a, tt.b, 100, 300)), 300; math.Abs(float64(got-want)) > 1 {
					t.Errorf("tokens = %d, want %d", got, want)
				}
				return
			}
			if math.Abs(a-tt.a) > 1e-6 || math.Abs(b-tt.b) > 1e-9 {
				t.Errorf("fit a %g b %g, want %g %g", a, b, tt.a, tt.b)
			}
			n := c.tokens(tt.start, tt.ms)
			if got := cost(tt.a, tt.b, tt.start, n); got > tt.ms || cost(tt.a, tt.b, tt.start, n+2) <= tt.ms {
				t.Errorf("%d tokens from %d take %.0f ms, want the most within %.0f", n, tt.start, got, tt.ms)
			}
			// Further into the prompt, fewer tokens fit the same time.
			if far := c.tokens(tt.start+500, tt.ms); far >= n {
				t.Errorf("%d tokens from %d, %d from %d: position costs nothing", n, tt.start, far, tt.start+500)
			}
		})
	}
}

// TestPrefillMeterSaved: what a run measured is there for the next one on
// the same machine (speed and cost model alike), and not on another.
func TestPrefillMeterSaved(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "lore.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m, err := newPrefillMeter(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := m.tokS("chat@1"); s != 0 || m.readable("chat@1", 0, 1000) != -1 {
		t.Fatalf("a new data folder knows a speed: %v", s)
	}
	for _, r := range []struct{ start, n int }{{0, 86}, {86, 700}, {300, 300}} {
		if !m.note("chat@1", r.start, r.n, float64(r.n)*4) {
			t.Fatalf("a read of %d tokens was not noted", r.n)
		}
	}
	if m.note("chat@1", 0, 3, 1) {
		t.Error("a 3-token read was noted: too short to say anything")
	}
	if err := m.save(ctx); err != nil {
		t.Fatal(err)
	}
	want, _ := m.tokS("chat@1")
	wantN := m.readable("chat@1", 200, 900)

	again, err := newPrefillMeter(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	got, saved := again.tokS("chat@1")
	if got != want || !saved || again.readable("chat@1", 200, 900) != wantN {
		t.Errorf("after a restart: %.1f tok/s (saved %v), %d tokens readable; want %.1f, %d", got, saved, again.readable("chat@1", 200, 900), want, wantN)
	}
	again.note("chat@1", 0, 100, 400)
	if _, saved := again.tokS("chat@1"); saved {
		t.Error("a speed measured in this run still reads as saved")
	}

	if err := db.PutSetting(ctx, prefillKey, "not the saved form"); err != nil {
		t.Fatal(err)
	}
	if bad, err := newPrefillMeter(ctx, db); err == nil || bad == nil {
		t.Errorf("unreadable figures: %v, %v; want an error and an empty meter to measure again", bad, err)
	}
	if err := db.PutSetting(ctx, prefillKey, savedPrefill{Machine: "another CPU", Models: map[string]savedModel{"chat@1": {TokS: 999}}}); err != nil {
		t.Fatal(err)
	}
	other, err := newPrefillMeter(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := other.tokS("chat@1"); s != 0 {
		t.Errorf("a speed measured on another machine was believed: %.0f tok/s", s)
	}
}

// TestSpeedKey: a prefill speed belongs to how the model runs, not only to
// the file: the same model opened with other threads, GPU layers or flash
// attention measures (and saves) its speed apart.
func TestSpeedKey(t *testing.T) {
	chat := filepath.Join(t.TempDir(), "chat.gguf")
	if err := synth.Write(chat, synth.Options{Shape: "tiny", Seed: 1}); err != nil {
		t.Fatal(err)
	}
	key := func(opt engine.Options) string {
		t.Helper()
		opt.Path = chat
		m, err := engine.Open(opt)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		return speedKey(m)
	}
	base := key(engine.Options{Threads: 1})
	seen := map[string]string{base: "threads 1"}
	for name, opt := range map[string]engine.Options{
		"threads 2":          {Threads: 2},
		"GPU layers":         {Threads: 1, GPULayers: 8},
		"flash attention on": {Threads: 1, FlashAttention: "on"},
	} {
		k := key(opt)
		if other, ok := seen[k]; ok {
			t.Errorf("%s and %s share the speed key %q", name, other, k)
		}
		seen[k] = name
	}
	if again := key(engine.Options{Threads: 1}); again != base {
		t.Errorf("the same model and options: %q, then %q", base, again)
	}
}
