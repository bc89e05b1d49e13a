package app

import "math"

// prefillCost models how long a chat model takes to read n prompt tokens
// that start at position s. Each token costs a + b·(its position), since
// attention spans every cell before it: on a 2-core AMD EPYC the 0.5b
// model reads a token at position 700 about 1.7× slower than the first
// (a/b ≈ 1,000 fitted), so a single tokens-per-second figure, measured
// mostly on cold prompts, promised more reading after Enter (behind a
// prompt read while typing) than the first-token budget holds. a and b
// are fitted by least squares over the recent prefills, older ones
// weighing less.
type prefillCost struct {
	// Weighted sums of the regressors x1 = n, x2 = positions read
	// (n·s + n²/2) and of the milliseconds y.
	s11, s12, s22, t1, t2 float64
}

// costMemory is the weight a prefill keeps per later one: about the last
// ten prefills count.
const costMemory = 0.9

func positions(start, n int) float64 {
	return float64(n)*float64(start) + float64(n)*float64(n)/2
}

// add records that n tokens from position start took ms.
func (c *prefillCost) add(start, n int, ms float64) {
	if n <= 0 || ms <= 0 {
		return
	}
	x1, x2 := float64(n), positions(start, n)
	for _, v := range []*float64{&c.s11, &c.s12, &c.s22, &c.t1, &c.t2} {
		*v *= costMemory
	}
	c.s11 += x1 * x1
	c.s12 += x1 * x2
	c.s22 += x2 * x2
	c.t1 += x1 * ms
	c.t2 += x2 * ms
}

// coef is the fitted cost per token (a, ms) and per token and position
// before it (b, ms). While the prefills seen do not tell the two apart
// (all from about the same position, like the system prefix read at
// start), b is taken as a/doubleAt and a fitted to them; ok is false
// before any prefill.
func (c *prefillCost) coef() (a, b float64, ok bool) {
	if c.s11 == 0 {
		return 0, 0, false
	}
	if det := c.s11*c.s22 - c.s12*c.s12; det > 1e-3*c.s11*c.s22 {
		a, b = (c.t1*c.s22-c.t2*c.s12)/det, (c.s11*c.t2-c.s12*c.t1)/det
		// A few noisy reads can fit nonsense (a per-token cost near 0):
		// only a plausible doubling position is believed.
		if a > 0 && b >= 0 && b*minDoubleAt <= a && a <= b*maxDoubleAt {
			return a, b, true
		}
	}
	// ms = a·(x1 + x2/doubleAt), one coefficient by least squares.
	k := 1.0 / doubleAt
	a = (c.t1 + k*c.t2) / (c.s11 + 2*k*c.s12 + k*k*c.s22)
	return a, a * k, true
}

// doubleAt is the prompt position where a token costs twice as much to read
// as the first, assumed until the prefills seen measure it: 700–1,000 for the
// 0.5b synthetic model on a 2-core AMD EPYC (flash attention on or off). Too
// low a guess leaves a passage out that would have fit; too high misses the
// first-token budget.
const doubleAt = 800

// The doubling positions a fit may find, or it is not believed.
const minDoubleAt, maxDoubleAt = 100, 100_000

// tokens is how many tokens from position start the model reads in ms
// (-1: unknown).
func (c *prefillCost) tokens(start int, ms float64) int {
	a, b, ok := c.coef()
	if !ok {
		return -1
	}
	// n·(a + b·start) + b·n²/2 = ms, solved in the form that stays exact
	// as b goes to 0.
	lin := a + b*float64(start)
	n := 2 * ms / (math.Sqrt(lin*lin+2*b*ms) + lin)
	return int(min(n, maxReadable))
}

// maxReadable bounds tokens' answer (no prompt is longer).
const maxReadable = 1 << 24
