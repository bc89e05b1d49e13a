package vector

import (
	"math"
	"math/rand/v2"
)

// Clustered returns n unit vectors in clusters (synthetic test and benchmark
// vectors).
func Clustered(n, dim int, seed uint64) [][]float32 {
	c, _ := BenchData(n, dim, 0, seed)
	return c
}

// blobSpread is the per-coordinate standard deviation of a blob relative to
// its centre, scaled by 1/sqrt(dim): 0.75 puts members of one blob at cosine
// ~0.6 from each other and ~0 from other blobs.
const blobSpread = 0.75

// Blobs draws n vectors around the centres.
func Blobs(r *rand.Rand, centres [][]float32, n int) [][]float32 {
	dim := len(centres[0])
	sd := blobSpread / math.Sqrt(float64(dim))
	out := make([][]float32, n)
	arena := make([]float32, n*dim)
	for i := range out {
		c := centres[r.IntN(len(centres))]
		v := arena[i*dim : (i+1)*dim : (i+1)*dim]
		for j := range v {
			v[j] = c[j] + float32(r.NormFloat64()*sd)
		}
		Normalize(v)
		out[i] = v
	}
	return out
}

// gaussian returns a random vector of norm about scale.
func Gaussian(r *rand.Rand, dim int, scale float64) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	Normalize(v)
	for i := range v {
		v[i] *= float32(scale)
	}
	return v
}

// Recall reports the fraction of want's ids that got contains.
func Recall(got, want []Result) float64 {
	if len(want) == 0 {
		return 1
	}
	seen := make(map[int64]bool, len(got))
	for _, r := range got {
		seen[r.ID] = true
	}
	hit := 0
	for _, r := range want {
		if seen[r.ID] {
			hit++
		}
	}
	return float64(hit) / float64(len(want))
}

// BenchData returns a clustered corpus of n vectors and nq and queries from the same blobs.
func BenchData(n, dim, nq int, seed uint64) (corpus, queries [][]float32) {
	r := rand.New(rand.NewPCG(seed, 0x6c6f7265))
	k := max(1, min(150, n/100))
	centres := make([][]float32, k)
	for i := range centres {
		centres[i] = Gaussian(r, dim, 1)
	}
	return Blobs(r, centres, n), Blobs(r, centres, nq)
}
