package vector

// Dot returns the dot product of a and b, which must have the same length.
// On L2-normalised vectors it is the cosine similarity. On amd64 with AVX2
// and FMA it runs an assembly kernel, elsewhere dotGo.
func Dot(a, b []float32) float32 {
	if len(a) != len(b) {
		panic("vector: Dot of slices with different lengths")
	}
	return dot(a, b)
}

// dotGo is the portable kernel. Go does not auto-vectorise, so the loop
// keeps eight independent accumulators (breaking the add dependency chain)
// and re-slices eight elements at a time so the compiler drops the bounds
// checks inside the body. len(b) must be at least len(a).
func dotGo(a, b []float32) float32 {
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	for len(a) >= 8 {
		x := a[:8:8]
		y := b[:8:8]
		s0 += x[0] * y[0]
		s1 += x[1] * y[1]
		s2 += x[2] * y[2]
		s3 += x[3] * y[3]
		s4 += x[4] * y[4]
		s5 += x[5] * y[5]
		s6 += x[6] * y[6]
		s7 += x[7] * y[7]
		a = a[8:]
		b = b[8:]
	}
	for i := range a {
		s0 += a[i] * b[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}
