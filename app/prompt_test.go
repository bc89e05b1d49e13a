package app

import (
	"math"
	"strings"
	"testing"

	"lore/engine"
	"lore/index/retrieve"
)

func TestAssemble(t *testing.T) {
	tmpl := engine.TemplateFor("<|im_start|>") // ChatML by marker
	ps := []retrieve.Passage{
		{ChunkID: 30, Rel: "c.md", Text: "third", Tokens: 100},
		{ChunkID: 10, Rel: "a.md", Text: "first", Tokens: 100},
		{ChunkID: 20, Rel: "b.md", Text: "second", Tokens: 400},
	}
	tests := []struct {
		name    string
		budget  int
		history []turn
		want    []int64 // chunk ids in prompt order
	}{
		{"all fit, stable order", 1000, nil, []int64{10, 20, 30}},
		{"budget skips the long one", 250, nil, []int64{10, 30}},
		{"first passage always fits, truncated", 50, nil, []int64{30}},
		{"history after passages", 1000, []turn{{Message: engine.Message{Role: "user", Content: "earlier q"}}, {Message: engine.Message{Role: "assistant", Content: "earlier a"}}}, []int64{10, 20, 30}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := assemble(tmpl, nil, tt.history, "the question", ps, tt.budget)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, x := range p.passages {
				got = append(got, x.ChunkID)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("passages %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("passages %v, want %v", got, tt.want)
				}
			}
			prefix, _ := tmpl.Prefix(systemPrompt)
			if !strings.HasPrefix(p.text, prefix) {
				t.Error("prompt does not start with the cached system prefix")
			}
			if !strings.HasSuffix(p.text, "Question: the question<|im_end|>\n<|im_start|>assistant\n") {
				t.Errorf("question is not last: %q", p.text[len(p.text)-80:])
			}
			if i := strings.Index(p.text, "[1] "); i < 0 || i > strings.LastIndex(p.text, "Question:") {
				t.Error("sources not numbered before the question")
			}
			if len(tt.history) > 0 && strings.Index(p.text, "earlier a") > strings.Index(p.text, "[1] ") {
				t.Error("this turn's passages placed before the history")
			}
		})
	}
}

// TestAssembleFollowUp: a follow-up repeats the earlier turn byte for byte
// (its passages, its question, the answer), so the previous prompt is a
// prefix of the new one; passages already held are not repeated.
func TestAssembleFollowUp(t *testing.T) {
	tmpl := engine.TemplateFor("<|im_start|>")
	a := retrieve.Passage{ChunkID: 10, Rel: "a.md", Text: "first", Tokens: 100}
	b := retrieve.Passage{ChunkID: 20, Rel: "b.md", Text: "second", Tokens: 100}
	c := retrieve.Passage{ChunkID: 30, Rel: "c.md", Text: "third", Tokens: 100}
	first, err := assemble(tmpl, nil, nil, "q1", []retrieve.Passage{b, a}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	history := []turn{{Message: engine.Message{Role: "user", Content: "q1"}, passages: first.turn},
		{Message: engine.Message{Role: "assistant", Content: "answer one"}}}
	next, err := assemble(tmpl, nil, history, "q2", []retrieve.Passage{c, a}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	upToAnswer := strings.TrimSuffix(first.text, "<|im_start|>assistant\n")
	if !strings.HasPrefix(next.text, upToAnswer+"<|im_start|>assistant\nanswer one") {
		t.Errorf("the follow-up does not repeat the first turn:\n%s\n---\n%s", first.text, next.text)
	}
	if len(next.turn) != 1 || next.turn[0].ChunkID != 30 || len(next.passages) != 3 {
		t.Errorf("turn passages %v, all %v: want only the new one in this turn", next.turn, next.passages)
	}
	if !strings.Contains(next.text, "[3] c.md") {
		t.Errorf("the new passage is not numbered after the earlier ones: %q", next.text)
	}
}

func TestAgreement(t *testing.T) {
	for _, c := range []struct {
		a, b         []int
		n            int
		same, prefix float64
	}{
		{[]int{1, 2, 3, 4}, []int{1, 2, 3, 4}, 4, 1, 1},
		{[]int{1, 2, 3, 4}, []int{1, 9, 3, 4}, 4, 0.75, 0.25},
		{[]int{1, 2}, []int{1, 2}, 4, 1, 1},           // both stopped after two tokens
		{[]int{1, 2}, []int{1, 2, 3, 4}, 4, 0.5, 0.5}, // one stopped early
		{nil, []int{5}, 2, 0.5, 0},
	} {
		if same, prefix := agreement(c.a, c.b, c.n); same != c.same || prefix != c.prefix {
			t.Errorf("agreement(%v, %v, %d) = %v, %v; want %v, %v", c.a, c.b, c.n, same, prefix, c.same, c.prefix)
		}
	}
}

func TestQuality(t *testing.T) {
	rel := map[string]bool{"a": true, "b": true}
	for _, c := range []struct {
		docs []string
		want Quality
	}{
		{[]string{"a", "b", "c"}, Quality{Recall1: 0.5, Recall5: 1, Recall20: 1, MRR: 1, NDCG10: 1}},
		{[]string{"c", "a"}, Quality{Recall5: 0.5, Recall20: 0.5, MRR: 0.5, NDCG10: (1 / math.Log2(3)) / (1 + 1/math.Log2(3))}},
		{[]string{"c", "d"}, Quality{}},
		{nil, Quality{}},
	} {
		if got := quality(c.docs, rel); math.Abs(got.NDCG10-c.want.NDCG10) > 1e-9 || got.Recall1 != c.want.Recall1 ||
			got.Recall5 != c.want.Recall5 || got.Recall20 != c.want.Recall20 || got.MRR != c.want.MRR {
			t.Errorf("quality(%v) = %+v, want %+v", c.docs, got, c.want)
		}
	}
}
