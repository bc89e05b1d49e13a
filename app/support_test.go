package app

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

func TestCheckSupport(t *testing.T) {
	passages := []string{
		"river.md › The river\nThe river market opens at dawn. Boats bring fish and grain from the north.",
		"music.md › Music\nThe city orchestra plays a summer concert in the park every year.",
	}
	for _, tc := range []struct {
		name                          string
		answer                        string
		passages                      []string // nil: passages
		score                         float64  // -1: no score
		sentences, supported, uncited int
		cites                         [][]int // each checked sentence's citations; nil: not checked
	}{
		{name: "cited and supported", answer: "The market opens at dawn [1].",
			score: 1, sentences: 1, supported: 1, cites: [][]int{{1}}},
		{name: "citation after the full stop belongs to the sentence before",
			answer: "The market opens at dawn. [1] The orchestra plays in the park. [2]",
			score:  1, sentences: 2, supported: 2, cites: [][]int{{1}, {2}}},
		{name: "citation right after the full stop", answer: "The market opens at dawn.[1] The orchestra plays in the park.[2]",
			score: 1, sentences: 2, supported: 2, cites: [][]int{{1}, {2}}},
		{name: "the wrong passage cited", answer: "The orchestra plays a concert in the park [1].",
			score: 0, sentences: 1, cites: [][]int{{1}}},
		{name: "a source the prompt did not have", answer: "The market opens at dawn [3].",
			score: 0, sentences: 1, cites: [][]int{{3}}},
		{name: "a made-up source beside a real one", answer: "The market opens at dawn [1][7].",
			score: 0, sentences: 1, cites: [][]int{{1, 7}}},
		{name: "source zero", answer: "The market opens at dawn [0].", score: 0, sentences: 1},
		{name: "uncited, in a passage", answer: "Boats bring grain from the north.",
			score: 1, sentences: 1, supported: 1, uncited: 1, cites: [][]int{nil}},
		{name: "uncited, in none", answer: "Taxes are due in April.",
			score: 0, sentences: 1, uncited: 1},
		{name: "too short to check", answer: "Yes. See [1]. I could not find it in the library.", score: -1},
		{name: "empty", answer: "", score: -1},
		{name: "no passages", answer: "The market opens at dawn [1].", passages: []string{}, score: -1},
		{name: "plurals and case folded", answer: "A BOAT brings fishes to the markets [1].",
			score: 1, sentences: 1, supported: 1},
		{name: "punctuation is no word", answer: "“Market” — opens; (dawn)! [1]", score: 1, sentences: 1, supported: 1},
		{name: "a quarter found", answer: "The market sells spices and silk [1].", score: 0, sentences: 1},
		{name: "two of three found", answer: "The market opens with spices [1].", score: 1, sentences: 1, supported: 1},
		{name: "half found is enough", answer: "Market spices [1].", score: 1, sentences: 1, supported: 1},
		{name: "several sources: their words together",
			answer: "The orchestra plays a summer concert near the river market [1, 2].",
			score:  1, sentences: 1, supported: 1, cites: [][]int{{1, 2}}},
		{name: "several sources: one alone is not enough",
			answer: "The orchestra plays a summer concert near the river market [1].", score: 0, sentences: 1},
		{name: "a range", answer: "The orchestra plays a summer concert near the river market [1-2].",
			score: 1, sentences: 1, supported: 1, cites: [][]int{{1, 2}}},
		{name: "a range backwards", answer: "The orchestra plays a summer concert near the river market [2-1].",
			score: 0, sentences: 1, cites: [][]int{{0}}},
		{name: "list items are sentences", answer: "- Boats bring fish [1]\n- The orchestra plays every year [2]\n",
			score: 1, sentences: 2, supported: 2, cites: [][]int{{1}, {2}}},
		{name: "half supported, half uncited", answer: "The market opens at dawn [1]. Taxes are due in April.",
			score: 0.5, sentences: 2, supported: 1, uncited: 1, cites: [][]int{{1}, nil}},
		{name: "a decimal point ends no sentence", answer: "Version 2.5 of the market opens at dawn [1].",
			score: 1, sentences: 1, supported: 1, cites: [][]int{{1}}},
		{name: "an image is no sentence end", answer: "The market opens at dawn ![map](m.png) [1].",
			score: 1, sentences: 1, supported: 1, cites: [][]int{{1}}},
		{name: "a closing quote stays with its sentence", answer: `The sign says "the market opens at dawn." [1] Taxes are due.`,
			score: 0.5, sentences: 2, supported: 1, uncited: 1, cites: [][]int{{1}, nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := passages
			if tc.passages != nil {
				ps = tc.passages
			}
			s := CheckSupport(tc.answer, ps)
			score := -1.0
			if s.Score != nil {
				score = *s.Score
			}
			if math.Abs(score-tc.score) > 1e-9 || s.Sentences != tc.sentences || s.Supported != tc.supported || s.Uncited != tc.uncited {
				t.Errorf("score %v, %d/%d supported, %d uncited; want %v, %d/%d, %d uncited\nverdicts %+v",
					score, s.Supported, s.Sentences, s.Uncited, tc.score, tc.supported, tc.sentences, tc.uncited, s.Verdicts)
			}
			if len(s.Verdicts) != s.Sentences {
				t.Errorf("%d verdicts for %d sentences", len(s.Verdicts), s.Sentences)
			}
			if tc.cites != nil {
				var got [][]int
				for _, v := range s.Verdicts {
					got = append(got, v.Cites)
				}
				if !slices.EqualFunc(got, tc.cites, slices.Equal) {
					t.Errorf("citations %v, want %v", got, tc.cites)
				}
			}
		})
	}
}

func TestSingular(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"boats", "boat"}, {"policies", "policy"}, {"matches", "match"}, {"boxes", "box"}, {"classes", "class"},
		{"class", "class"}, {"status", "status"}, {"analysis", "analysis"}, {"bus", "bus"}, {"gas", "gas"}, {"boat", "boat"},
	} {
		if got := singular(tc.in); got != tc.want {
			t.Errorf("singular(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestStatsSupport: the window's support summary counts the answers that
// have a score (an extractive or unfinished answer has none), their mean
// and the share under LowSupport; traces before the window are left out.
func TestStatsSupport(t *testing.T) {
	ctx := context.Background()
	a, err := New(ctx, Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	now := time.Now()
	for i, tc := range []struct {
		score *float64
		age   time.Duration
	}{
		{ptr(1.0), time.Minute}, {ptr(0.5), time.Minute}, {ptr(0.25), time.Minute}, {ptr(0.0), time.Minute},
		{nil, time.Minute},        // no checkable sentence
		{ptr(0.0), 3 * time.Hour}, // before the 1h window
	} {
		tr := &Trace{RequestID: fmt.Sprint("r", i), Received: now.Add(-tc.age), Support: tc.score,
			Stages: map[string]float64{StageTTFT: 100, StageTotal: 200}}
		if err := a.saveTrace(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		window string
		want   SupportStats
	}{
		{"1h", SupportStats{N: 4, Mean: 0.438, Low: 2, LowRate: 0.5}}, // 0.5 is not low
		{"all", SupportStats{N: 5, Mean: 0.35, Low: 3, LowRate: 0.6}},
		{"15s", SupportStats{}},
	} {
		st, err := a.Stats(ctx, tc.window)
		if err != nil {
			t.Fatal(err)
		}
		got := st.Support
		if got.N != tc.want.N || got.Mean != tc.want.Mean || got.Low != tc.want.Low || got.LowRate != tc.want.LowRate {
			t.Errorf("%s: support %+v, want %+v", tc.window, got, tc.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
