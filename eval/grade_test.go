package eval

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		answer string
		gold   []string
		want   bool
	}{
		{"Employees get 25 days of holiday a year [1].", []string{"25 days"}, true},
		{"Employees get 25\n  DAYS of holiday.", []string{"25 days"}, true},
		{"It costs 150 pounds.", []string{"50"}, false},
		{"It costs 50 pounds.", []string{"50"}, true},
		{"Use --sort=time.", []string{"--sort=time"}, true},
		{"Run git stash pop.", []string{"git stash pop", "stash pop"}, true},
		{"The deadline is Friday.", []string{"monday", "tuesday"}, false},
		{"popular choice", []string{"pop"}, false},
		{"", []string{"x"}, false},
	} {
		if got := Match(tc.answer, tc.gold); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.answer, tc.gold, got, tc.want)
		}
	}
}

func TestAbstains(t *testing.T) {
	for _, tc := range []struct {
		answer string
		want   bool
	}{
		{"I could not find it in the library.", true},
		{"I couldn't find that in the sources.", true},
		{"The sources do not mention a Wi-Fi password.", true},
		{"That is not stated in the documents.", true},
		{"Employees get 25 days of holiday [1].", false},
		{"Book them in the HR portal [2].", false},
	} {
		if got := Abstains(tc.answer); got != tc.want {
			t.Errorf("Abstains(%q) = %v, want %v", tc.answer, got, tc.want)
		}
	}
}

func TestCitations(t *testing.T) {
	got := Citations("A [2]. B [1][2]. C [12] and [x].")
	if want := []int{2, 1, 12}; !slices.Equal(got, want) {
		t.Fatalf("Citations = %v, want %v", got, want)
	}
}

func TestReadQuestions(t *testing.T) {
	good := `{"query": "How many days?", "answers": ["25 days"], "relevant": ["a.md"], "kind": "number"}

{"query": "Wi-Fi password?", "answers": [], "relevant": [], "kind": "unanswerable"}`
	qs, err := ReadQuestions(strings.NewReader(good))
	if err != nil || len(qs) != 2 || !qs[1].Unanswerable() {
		t.Fatalf("ReadQuestions = %+v, %v", qs, err)
	}
	for name, line := range map[string]string{
		"no query":            `{"query": "", "answers": ["x"], "relevant": ["a"], "kind": "fact"}`,
		"bad kind":            `{"query": "q", "answers": ["x"], "relevant": ["a"], "kind": "opinion"}`,
		"no gold":             `{"query": "q", "answers": [], "relevant": ["a"], "kind": "fact"}`,
		"unanswerable w/gold": `{"query": "q", "answers": ["x"], "relevant": [], "kind": "unanswerable"}`,
		"empty gold":          `{"query": "q", "answers": [" "], "relevant": ["a"], "kind": "fact"}`,
		"unknown field":       `{"query": "q", "answers": ["x"], "relevant": ["a"], "kind": "fact", "extra": 1}`,
		"not json":            `{"query": `,
		"empty file":          ``,
	} {
		if _, err := ReadQuestions(strings.NewReader(line)); err == nil {
			t.Errorf("%s: accepted %s", name, line)
		}
	}
}

// TestSets keeps the answer sets in this folder readable.
func TestSets(t *testing.T) {
	for _, f := range []string{"answers-sample.jsonl", "answers-manpages.jsonl"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		qs, err := ReadQuestions(strings.NewReader(string(b)))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(qs) < 40 {
			t.Errorf("%s: %d questions, want 40 or more", f, len(qs))
		}
		for _, q := range qs {
			if Match(q.Query, q.Answers) {
				t.Errorf("%s: %q holds its own gold answer", f, q.Query)
			}
		}
	}
}
