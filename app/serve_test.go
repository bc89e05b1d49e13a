package app

import (
	"math"
	"testing"
)

func TestFinite(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, tt := range []struct {
		xs   []float32
		want bool
	}{
		{nil, true},
		{[]float32{0, -1.5, 3e38}, true},
		{[]float32{0.1, nan}, false},
		{[]float32{inf}, false},
		{[]float32{-inf, 1}, false},
	} {
		if got := finite(tt.xs); got != tt.want {
			t.Errorf("finite(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
}
