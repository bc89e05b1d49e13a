package app

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"

	"lore/engine/cpu"
	"lore/store"
)

// prefillMeter keeps what each chat model's prompt reading measured on this
// machine: a speed (tokens/s, an EWMA) for routes and ETAs, and a cost
// model for the tokens a first-token budget holds. It is saved with the
// data, so that the first question after a restart is laid out by what
// was measured, not by a guess (a restored system prefix measures nothing).
type prefillMeter struct {
	mu    sync.Mutex // guards speed, cost and saved
	speed map[string]float64
	cost  map[string]*prefillCost
	saved map[string]bool // models whose figures came from the data folder, not yet measured in this run

	// save writes are ordered: the last one holds the newest figures.
	saveMu sync.Mutex
	db     *store.DB
}

// prefillKey is the setting that holds the saved figures.
const prefillKey = "prefill_measured"

// savedPrefill is the saved form: figures are only believed on the machine
// (CPU features, runner build, cores) that measured them.
type savedPrefill struct {
	Machine string                `json:"machine"`
	Models  map[string]savedModel `json:"models"`
}

type savedModel struct {
	TokS float64    `json:"tok_s"`
	Cost [5]float64 `json:"cost"` // prefillCost's sums
}

// machineID names what a prefill speed depends on besides the model.
var machineID = sync.OnceValue(func() string {
	s := cpu.Describe()
	return fmt.Sprintf("%s|%s|%d", s.Features, s.Variant, runtime.NumCPU())
})

func newPrefillMeter(ctx context.Context, db *store.DB) (*prefillMeter, error) {
	m := &prefillMeter{speed: map[string]float64{}, cost: map[string]*prefillCost{}, saved: map[string]bool{}, db: db}
	var s savedPrefill
	if _, err := db.Setting(ctx, prefillKey, &s); err != nil {
		// Only what was measured is lost: the next prefill measures again.
		return m, fmt.Errorf("load the measured prefill speeds: %w", err)
	}
	if s.Machine != machineID() {
		return m, nil // measured elsewhere (or never)
	}
	for id, v := range s.Models {
		if !(v.TokS > 0 && !math.IsInf(v.TokS, 0)) {
			continue
		}
		m.speed[id] = v.TokS
		c := prefillCost{}
		c.s11, c.s12, c.s22, c.t1, c.t2 = v.Cost[0], v.Cost[1], v.Cost[2], v.Cost[3], v.Cost[4]
		m.cost[id] = &c
		m.saved[id] = true
	}
	return m, nil
}

// note records that model read tokens from position start in ms; false
// when the read was too short to say anything (nothing to save).
func (m *prefillMeter) note(model string, start, tokens int, ms float64) bool {
	if tokens < 16 || ms <= 0 {
		return false
	}
	m.mu.Lock()
	m.speed[model] = ewma(m.speed[model], float64(tokens)/(ms/1000))
	c := m.cost[model]
	if c == nil {
		c = &prefillCost{}
		m.cost[model] = c
	}
	c.add(start, tokens, ms)
	delete(m.saved, model)
	m.mu.Unlock()
	return true
}

// save writes the figures to the data folder.
func (m *prefillMeter) save(ctx context.Context) error {
	m.saveMu.Lock()
	defer m.saveMu.Unlock()
	s := savedPrefill{Machine: machineID(), Models: map[string]savedModel{}}
	m.mu.Lock()
	for id, v := range m.speed {
		sm := savedModel{TokS: v}
		if c := m.cost[id]; c != nil {
			sm.Cost = [5]float64{c.s11, c.s12, c.s22, c.t1, c.t2}
		}
		s.Models[id] = sm
	}
	m.mu.Unlock()
	if err := m.db.PutSetting(ctx, prefillKey, s); err != nil {
		return fmt.Errorf("save the measured prefill speeds: %w", err)
	}
	return nil
}

// tokS is model's measured prefill speed (0: unknown); fromSaved says it
// was measured in an earlier run and not yet in this one.
func (m *prefillMeter) tokS(model string) (tokS float64, fromSaved bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.speed[model], m.saved[model]
}

// readable is how many prompt tokens from position start model reads in
// ms, by what it measured (-1: unknown).
func (m *prefillMeter) readable(model string, start int, ms float64) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.cost[model]; c != nil {
		return c.tokens(start, ms)
	}
	return -1
}

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
