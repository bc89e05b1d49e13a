package bench

import (
	"encoding/json"
	"os"
	"testing"
	"time"
)

// TestTypingMatchesUI replays the cases the UI's DraftPrefetcher passes
// (frontend/test/prefetch.test.ts), so the benchmark types as the UI sends.
func TestTypingMatchesUI(t *testing.T) {
	b, err := os.ReadFile("../frontend/test/typing-cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Text  string  `json:"text"`
		GapMs int     `json:"gap_ms"`
		Sends [][]any `json:"sends"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		got, enter := Typing(c.Text, time.Duration(c.GapMs)*time.Millisecond)
		if len(got) != len(c.Sends) {
			t.Errorf("%q: sends %v, want %v", c.Text, got, c.Sends)
			continue
		}
		for i, s := range c.Sends {
			if at := time.Duration(s[0].(float64)) * time.Millisecond; got[i].At != at || got[i].Draft != s[1].(string) {
				t.Errorf("%q send %d: %v %q, want %v %q", c.Text, i, got[i].At, got[i].Draft, at, s[1])
			}
		}
		if want := time.Duration(len([]rune(c.Text))+1) * time.Duration(c.GapMs) * time.Millisecond; enter != want {
			t.Errorf("%q: Enter at %v, want %v", c.Text, enter, want)
		}
	}
}
