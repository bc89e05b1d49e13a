package app

import (
	"math"
	"testing"
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
