package app

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"lore/engine"
)

// Fidelity compares stitched prompts (saved passage KV, k tokens of each
// passage read again) with the same prompts read in full, on one model.
type Fidelity struct {
	Model    string        `json:"model"`
	Prompts  int           `json:"prompts"`
	Tokens   int           `json:"tokens"` // greedy tokens compared per prompt
	Measured time.Time     `json:"measured"`
	Rows     []FidelityRow `json:"rows"`
}

// FidelityRow is one repair setting against full prefill.
type FidelityRow struct {
	Repair int    `json:"repair"` // engine.RepairAll: every token read again
	Label  string `json:"label"`
	// Agreement is the mean share of the first Tokens greedy tokens equal to
	// full prefill's, position by position; Prefix the mean share before
	// the first difference; FirstTop1 the share of prompts whose first
	// token is the same; KL the mean KL divergence (nats) of the first
	// token's distribution from full prefill's.
	Agreement float64 `json:"agreement"`
	Prefix    float64 `json:"prefix"`
	FirstTop1 float64 `json:"first_top1"`
	KL        float64 `json:"kl"`
	// StitchedTokens is the mean of tokens not read per prompt; PrefillMs
	// the median prefill.
	StitchedTokens float64 `json:"stitched_tokens"`
	PrefillMs      float64 `json:"prefill_ms"`
}

// The fidelity floor below which stitching is refused for a model: the
// first token must match full prefill in at least 9 prompts out of 10, and
// its distribution stay within 0.1 nats of it. Later tokens are reported
// but not gated: one different token sends a greedy answer down another
// path even when each step is faithful, so 32-token agreement understates
// fidelity.
const (
	minFirstTop1 = 0.9
	maxFirstKL   = 0.1
)

// Passes says whether the row is above the fidelity floor.
func (r FidelityRow) Passes() bool { return r.FirstTop1 >= minFirstTop1 && r.KL <= maxFirstKL }

// FidelityRequest is what MeasureFidelity compares.
type FidelityRequest struct {
	Workspace string
	Questions []string
	Repairs   []int // default 0, 4, 16, 32 and engine.RepairAll
	Tokens    int   // default 32
}

// MeasureFidelity builds each question's prompt as Ask would, saves its
// passages' KV, and generates greedily from the prompt read in full and
// stitched with each repair setting. The result is stored for the chat
// model, so Ask refuses stitching where it falls below the floor.
func (a *App) MeasureFidelity(ctx context.Context, req FidelityRequest) (Fidelity, error) {
	if len(req.Repairs) == 0 {
		req.Repairs = []int{0, 4, 16, 32, engine.RepairAll}
	}
	if req.Tokens <= 0 {
		req.Tokens = 32
	}
	ws, err := a.lookup(ctx, req.Workspace)
	if err != nil {
		return Fidelity{}, err
	}
	m, let := a.hold()
	defer let()
	if why := cannotStitch(m.chat); why != "" {
		return Fidelity{}, fmt.Errorf("fidelity: %s", why)
	}
	chat := local(m.chat)
	prefix, err := passagePrefix(m.chat.Template())
	if err != nil {
		return Fidelity{}, err
	}
	type run struct {
		logits  []float32
		tokens  []int
		prefill float64
		stitch  int
	}
	gen := func(parts []engine.Part, s *engine.Stitch) (run, error) {
		// Every run starts from the system prefix alone.
		if err := chat.TrimSeq(ctx, engine.SeqAnswer, a.warmTokens()); err != nil {
			return run{}, err
		}
		var r run
		st, err := m.chat.Generate(ctx, engine.GenerateRequest{Parts: parts, Stitch: s, MaxTokens: req.Tokens,
			Inspect: func(l []float32, t []int) { r.logits, r.tokens = l, t }}, func(string) error { return nil })
		r.prefill, r.stitch = st.PrefillMs, st.StitchedTokens
		return r, err
	}
	f := Fidelity{Model: m.chat.ID(), Tokens: req.Tokens, Measured: time.Now().UTC()}
	rows := make([]FidelityRow, len(req.Repairs))
	prefills := make([][]float64, len(req.Repairs))
	for _, q := range req.Questions {
		pl, err := a.quietPlan(ctx, a.newQuestion(q, ws, m), forQuestion)
		if err != nil {
			return f, err
		}
		parts := pl.prompt.parts()
		if parts == nil || len(pl.passages) == 0 {
			continue
		}
		for _, p := range parts {
			if p.Passage {
				if _, err := chat.CachePassage(ctx, prefix, p.Text); err != nil {
					return f, fmt.Errorf("fidelity: save passage: %w", err)
				}
			}
		}
		full, err := gen(parts, nil)
		if err != nil {
			return f, err
		}
		for i, k := range req.Repairs {
			r, err := gen(parts, &engine.Stitch{Prefix: prefix, Repair: k})
			if err != nil {
				return f, err
			}
			row := &rows[i]
			same, prefixLen := agreement(full.tokens, r.tokens, req.Tokens)
			row.Agreement += same
			row.Prefix += prefixLen
			if len(full.tokens) > 0 && len(r.tokens) > 0 && full.tokens[0] == r.tokens[0] {
				row.FirstTop1++
			}
			if len(full.logits) == 0 || len(full.logits) != len(r.logits) {
				return f, fmt.Errorf("fidelity: the model returned %d and %d logits", len(full.logits), len(r.logits))
			}
			row.KL += klDivergence(full.logits, r.logits)
			row.StitchedTokens += float64(r.stitch)
			prefills[i] = append(prefills[i], r.prefill)
		}
		f.Prompts++
	}
	if f.Prompts == 0 {
		return f, errors.New("fidelity: no question found passages to stitch")
	}
	n := float64(f.Prompts)
	for i := range rows {
		r := &rows[i]
		r.Repair, r.Label = req.Repairs[i], repairLabel(req.Repairs[i])
		r.Agreement, r.Prefix, r.FirstTop1 = round(r.Agreement/n), round(r.Prefix/n), round(r.FirstTop1/n)
		r.KL, r.StitchedTokens = math.Round(r.KL/n*1e4)/1e4, round(r.StitchedTokens/n)
		slices.Sort(prefills[i])
		r.PrefillMs = round(prefills[i][len(prefills[i])/2])
	}
	f.Rows = rows
	if err := a.db.PutSetting(ctx, fidelityKey(f.Model), f); err != nil {
		return f, fmt.Errorf("store fidelity: %w", err)
	}
	return f, nil
}

func fidelityKey(model string) string { return "fidelity:" + model }

func repairLabel(k int) string {
	if k >= engine.RepairAll {
		return "recompute all"
	}
	return fmt.Sprintf("k=%d", k)
}

// fidelityRefuses says why stitching with repair k is refused for model
// ("" when it is not): its measured fidelity at that k is below the floor.
// An unmeasured model or k is allowed (the setting is opt-in and labelled
// approximate); note says so.
func (a *App) fidelityRefuses(ctx context.Context, model string, k int) (refuse, note string) {
	var f Fidelity
	found, err := a.db.Setting(ctx, fidelityKey(model), &f)
	if err != nil || !found {
		return "", "fidelity not measured for this model (lore bench ttft --fidelity)"
	}
	for _, r := range f.Rows {
		if r.Repair != k {
			continue
		}
		if !r.Passes() {
			return fmt.Sprintf("fidelity at %s is below the floor: first token as with full reading in %.0f%% of prompts (floor %.0f%%), KL %.3f nats (ceiling %.2f), measured %s",
				r.Label, 100*r.FirstTop1, 100*minFirstTop1, r.KL, maxFirstKL, f.Measured.Format("2006-01-02")), ""
		}
		return "", ""
	}
	return "", fmt.Sprintf("fidelity not measured at k=%d", k)
}

// agreement returns the share of the first n tokens of b equal to a's,
// position by position, and the share before the first difference; past
// the end of both (both stopped) counts as agreeing.
func agreement(a, b []int, n int) (same, prefix float64) {
	eq, pre := 0, 0
	for i := range n {
		ok := i >= len(a) && i >= len(b) || i < len(a) && i < len(b) && a[i] == b[i]
		if ok {
			eq++
			if pre == i {
				pre++
			}
		}
	}
	return float64(eq) / float64(n), float64(pre) / float64(n)
}

// klDivergence is KL(p‖q) in nats of the softmax distributions of two
// logit vectors of the same length.
func klDivergence(p, q []float32) float64 {
	lp, lq := logSoftmax(p), logSoftmax(q)
	kl := 0.0
	for i := range lp {
		kl += math.Exp(lp[i]) * (lp[i] - lq[i])
	}
	return max(kl, 0)
}

func logSoftmax(x []float32) []float64 {
	hi := math.Inf(-1)
	for _, v := range x {
		hi = max(hi, float64(v))
	}
	sum := 0.0
	for _, v := range x {
		sum += math.Exp(float64(v) - hi)
	}
	lse := hi + math.Log(sum)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - lse
	}
	return out
}

// fidelityTable formats f for a terminal.
func (f Fidelity) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fidelity of stitched prompts vs full reading on %s: %d prompts, %d greedy tokens each\n", f.Model, f.Prompts, f.Tokens)
	fmt.Fprintf(&b, "  %-14s %9s %9s %9s %9s %9s %9s  %s\n", "repair", "agree", "prefix", "1st-top1", "1st-KL", "stitched", "prefill", "floor")
	for _, r := range f.Rows {
		fmt.Fprintf(&b, "  %-14s %8.0f%% %8.0f%% %8.0f%% %9.4f %9.0f %7.0fms  %s\n", r.Label, 100*r.Agreement, 100*r.Prefix,
			100*r.FirstTop1, r.KL, r.StitchedTokens, r.PrefillMs, map[bool]string{true: "passes", false: "refused"}[r.Passes()])
	}
	return b.String()
}
