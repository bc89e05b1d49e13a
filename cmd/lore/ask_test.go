package main

import (
	"testing"

	"lore/app"
)

func TestSupportText(t *testing.T) {
	score := func(f float64) *float64 { return &f }
	for _, tc := range []struct {
		trace app.Trace
		want  string
	}{
		{app.Trace{Support: score(0.8), CheckedSentences: 5, SupportedSentences: 4}, "support 4/5 sentences (80%)"},
		{app.Trace{Support: score(0), CheckedSentences: 2, UncitedSentences: 2}, "support 0/2 sentences (0%) · 2 uncited"},
		{app.Trace{Support: score(2.0 / 3), CheckedSentences: 3, SupportedSentences: 2, UncitedSentences: 1}, "support 2/3 sentences (67%) · 1 uncited"},
		{app.Trace{}, ""}, // no checkable sentence: no line
	} {
		if got := supportText(&tc.trace); got != tc.want {
			t.Errorf("supportText = %q, want %q", got, tc.want)
		}
	}
}
