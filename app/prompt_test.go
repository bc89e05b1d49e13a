package app

import (
	"math"
	"slices"
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
		{"all fit, best first", 1000, nil, []int64{30, 10, 20}},
		{"budget skips the long one", 250, nil, []int64{30, 10}},
		{"first passage always fits, truncated", 50, nil, []int64{30}},
		{"history after passages", 1000, []turn{{Message: engine.Message{Role: "user", Content: "earlier q"}}, {Message: engine.Message{Role: "assistant", Content: "earlier a"}}}, []int64{30, 10, 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := assemble(tmpl, nil, tt.history, "the question", ps, tt.budget, reuse{})
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
			if !strings.HasPrefix(p.text(), prefix) {
				t.Error("prompt does not start with the cached system prefix")
			}
			if !strings.HasSuffix(p.text(), "Question: the question<|im_end|>\n<|im_start|>assistant\n") {
				t.Errorf("question is not last: %q", p.text()[len(p.text())-80:])
			}
			if i := strings.Index(p.text(), "[1] "); i < 0 || i > strings.LastIndex(p.text(), "Question:") {
				t.Error("sources not numbered before the question")
			}
			if len(tt.history) > 0 && strings.Index(p.text(), "earlier a") > strings.Index(p.text(), "[1] ") {
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
	first, err := assemble(tmpl, nil, nil, "q1", []retrieve.Passage{b, a}, 1000, reuse{})
	if err != nil {
		t.Fatal(err)
	}
	history := []turn{{Message: engine.Message{Role: "user", Content: "q1"}, passages: first.turn},
		{Message: engine.Message{Role: "assistant", Content: "answer one"}}}
	next, err := assemble(tmpl, nil, history, "q2", []retrieve.Passage{c, a}, 1000, reuse{})
	if err != nil {
		t.Fatal(err)
	}
	upToAnswer := strings.TrimSuffix(first.text(), "<|im_start|>assistant\n")
	if !strings.HasPrefix(next.text(), upToAnswer+"<|im_start|>assistant\nanswer one") {
		t.Errorf("the follow-up does not repeat the first turn:\n%s\n---\n%s", first.text(), next.text())
	}
	if len(next.turn) != 1 || next.turn[0].ChunkID != 30 || len(next.passages) != 3 {
		t.Errorf("turn passages %v, all %v: want only the new one in this turn", next.turn, next.passages)
	}
	if !strings.Contains(next.text(), "[3] c.md") {
		t.Errorf("the new passage is not numbered after the earlier ones: %q", next.text())
	}
}

// passagesOf gives passages of 100 tokens with these chunk ids.
func passagesOf(ids ...int64) []retrieve.Passage {
	var out []retrieve.Passage
	for _, id := range ids {
		out = append(out, retrieve.Passage{ChunkID: id, Tokens: 100})
	}
	return out
}

func chunkIDs(ps []retrieve.Passage) []int64 {
	var out []int64
	for _, x := range ps {
		out = append(out, x.ChunkID)
	}
	return out
}

func TestArrange(t *testing.T) {
	p := passagesOf
	ids := chunkIDs
	tests := []struct {
		name            string
		fit, held, pool []retrieve.Passage
		maxStale        int
		want            []int64
		kept, stale     int
	}{
		{"nothing held: best first", p(30, 10, 20), nil, p(30, 10, 20), 200, []int64{30, 10, 20}, 0, 0},
		{"the same set held: its order", p(10, 20, 30), p(30, 10, 20), p(10, 20, 30), 200, []int64{30, 10, 20}, 3, 0},
		{"a new passage goes last", p(40, 10, 20), p(20, 10), p(10, 20, 40), 200, []int64{20, 10, 40}, 2, 0},
		{"held passages still candidates stay", p(10, 40), p(10, 20, 30, 40), p(10, 20, 30, 40), 200, []int64{10, 20, 30, 40}, 4, 2},
		{"stale tokens are capped", p(10, 40), p(10, 20, 30, 40), p(10, 20, 30, 40), 100, []int64{10, 40}, 1, 0},
		{"a held passage no longer a candidate ends the reuse", p(10, 30, 40), p(10, 20, 30), p(10, 30, 40), 200, []int64{10, 30, 40}, 1, 0},
		{"trailing stale passages are dropped", p(10, 40), p(10, 20), p(10, 20, 40), 200, []int64{10, 40}, 1, 0},
		{"nothing kept when the first held passage went", p(10, 20), p(50, 10, 20), p(10, 20), 200, []int64{10, 20}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := arrange(tt.fit, tt.held, tt.pool, func(p retrieve.Passage) int { return p.Tokens }, tt.maxStale)
			if got := ids(l.passages); !slices.Equal(got, tt.want) || l.kept != tt.kept || l.stale != tt.stale {
				t.Errorf("arrange = %v kept %d stale %d, want %v kept %d stale %d", got, l.kept, l.stale, tt.want, tt.kept, tt.stale)
			}
			for _, f := range tt.fit {
				if !slices.Contains(ids(l.passages), f.ChunkID) {
					t.Errorf("fitted passage %d left out", f.ChunkID)
				}
			}
		})
	}
}

func TestTrimUnread(t *testing.T) {
	p := passagesOf
	size := func(p retrieve.Passage) int { return p.Tokens }
	cut := func(p retrieve.Passage, n int) (retrieve.Passage, *PassageCut, error) {
		c := &PassageCut{ChunkID: p.ChunkID, Tokens: p.Tokens - n}
		p.Tokens = n
		return p, c, nil
	}
	tests := []struct {
		name           string
		passages, held []retrieve.Passage
		fit            []retrieve.Passage // best first
		read           int
		allowance      int
		want           []int64
		kept, late     int
		cut            int // tokens cut from the best
	}{
		{"within the allowance", p(1, 2, 3), p(1, 2), p(1, 2, 3), 2, 100, []int64{1, 2, 3}, 2, 0, 0},
		{"the worst unread goes", p(1, 2, 3, 4), p(1, 2), p(3, 1, 2, 4), 2, 100, []int64{1, 2, 3}, 2, 1, 0},
		{"stale before fitted", p(1, 5, 3, 4), p(1, 5), p(1, 3, 4), 1, 200, []int64{1, 3, 4}, 1, 0, 0},
		{"the best stays, cut to the allowance", p(1, 2, 3, 4), p(1), p(4, 3, 1, 2), 1, 80, []int64{1, 4}, 1, 2, 20},
		{"the best is cut to no less than minCut", p(1, 2, 3), p(1), p(3, 1, 2), 1, 1, []int64{1, 3}, 1, 1, 100 - minCut},
		{"a cut held passage ends the kept prefix", p(1, 2, 3), p(1, 2, 3), p(2, 1, 3), 1, 50, []int64{1, 2}, 1, 1, 100 - minCut},
		{"read passages are never trimmed", p(1, 2, 3), p(1, 2, 3), p(3, 2, 1), 3, 0, []int64{1, 2, 3}, 3, 0, 0},
		{"an unread held passage counts", p(1, 2, 3, 4), p(1, 2, 3), p(1, 2, 3, 4), 1, 200, []int64{1, 2, 3}, 3, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := layout{passages: tt.passages, held: tt.held, kept: len(tt.held)}
			got, err := l.trimUnread(tt.read, tt.fit, size, cut, tt.allowance)
			if err != nil {
				t.Fatal(err)
			}
			cut := 0
			if got.cut != nil {
				cut = got.cut.Tokens
				if got.cut.ChunkID != tt.fit[0].ChunkID {
					t.Errorf("cut passage %d, want the best, %d", got.cut.ChunkID, tt.fit[0].ChunkID)
				}
			}
			if ids := chunkIDs(got.passages); !slices.Equal(ids, tt.want) || got.kept != tt.kept || got.late != tt.late || cut != tt.cut {
				t.Errorf("trimUnread = %v kept %d late %d cut %d, want %v kept %d late %d cut %d",
					ids, got.kept, got.late, cut, tt.want, tt.kept, tt.late, tt.cut)
			}
		})
	}
}

func TestCutPassage(t *testing.T) {
	doc := "Intro words here.\nNothing to see.\nThe HNSW index keeps\n  ef_search candidates per layer.\nTrailing text."
	tests := []struct {
		name, text, question string
		frac                 float64
		want                 string // "": not cut
	}{
		{"all of it", doc, "hnsw", 1, ""},
		{"the run with the most of the question's words", doc, "what does the hnsw index do with ef_search", 0.25,
			"… HNSW index keeps\n  ef_search …"},
		{"no question word: the start", doc, "unrelated", 0.2, "Intro words here. …"},
		{"then the most occurrences", "alpha x beta y z alpha beta alpha", "alpha beta", 0.375, "… alpha beta alpha"},
		{"text without spaces is cut too", strings.Repeat("索引", 40), "索引", 0.6, strings.Repeat("索引", 24) + " …"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cutPassage(tt.text, tt.question, tt.frac)
			got := ""
			if c != nil {
				got = c.apply(tt.text)
			}
			if got != tt.want {
				t.Errorf("cut = %q, want %q", got, tt.want)
			}
		})
	}
	// splitWords keeps every byte: a cut of it all is the text.
	for _, s := range []string{doc, " lead\tand trail \n", strings.Repeat("x", 50) + " y"} {
		if got := strings.Join(splitWords(s), ""); got != s {
			t.Errorf("splitWords(%q) joined = %q", s, got)
		}
	}
}

// TestAssembleExtends: a question whose drafts' layout is held starts its
// prompt with that layout's text, byte for byte, so the sequence holding it
// is reused up to the passages the question adds.
func TestAssembleExtends(t *testing.T) {
	tmpl := engine.TemplateFor("<|im_start|>")
	ps := map[int64]retrieve.Passage{}
	for _, id := range []int64{10, 20, 30, 40} {
		ps[id] = retrieve.Passage{ChunkID: id, Rel: "doc.md", Text: strings.Repeat("word ", int(id)), Tokens: 100}
	}
	get := func(ids ...int64) []retrieve.Passage {
		var out []retrieve.Passage
		for _, id := range ids {
			out = append(out, ps[id])
		}
		return out
	}
	draft, err := assemble(tmpl, nil, nil, "how do I", get(20, 30), 1000, reuse{})
	if err != nil {
		t.Fatal(err)
	}
	final, err := assemble(tmpl, nil, nil, "how do I book leave", get(40, 30, 10), 1000,
		reuse{held: [][]retrieve.Passage{draft.turn}, pool: get(40, 30, 10, 20)})
	if err != nil {
		t.Fatal(err)
	}
	upTo := draft.text()[:strings.Index(draft.text(), "Question:")]
	if !strings.HasPrefix(final.text(), upTo) {
		t.Fatalf("the question's prompt does not extend the draft's:\n%s\n---\n%s", draft.text(), final.text())
	}
	if final.kept != 2 || final.stale != 1 || len(final.turn) != 4 || final.newTokens != 200 || final.turnTokens != 400 {
		t.Errorf("kept %d stale %d turn %d new %d of %d tokens: want 2 kept (1 stale), 2 new of 4", final.kept, final.stale,
			len(final.turn), final.newTokens, final.turnTokens)
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

// TestPromptSegments: the prompt's pieces say what they are. The parts for
// stitching hold each passage's body whole and rebuild the prompt; the
// text read ahead ends at this turn's question mark; a template that moves
// contents around leaves an opaque prompt (no parts) rather than a wrong one.
func TestPromptSegments(t *testing.T) {
	a := retrieve.Passage{ChunkID: 10, Rel: "a.md", Text: "first", Tokens: 100}
	b := retrieve.Passage{ChunkID: 20, Rel: "b.md", Heading: "B", Text: "second", Tokens: 100}
	history := []turn{{Message: engine.Message{Role: "user", Content: "q1"}, passages: []retrieve.Passage{a}},
		{Message: engine.Message{Role: "assistant", Content: "answer one [1]"}}}
	for _, marker := range []string{"<|im_start|>", "<|start_header_id|>", "<|user|>", ""} {
		tmpl := engine.TemplateFor(marker)
		t.Run(tmpl.Name, func(t *testing.T) {
			p, err := assemble(tmpl, nil, history, "the question Question: again", []retrieve.Passage{b}, 1000, reuse{})
			if err != nil {
				t.Fatal(err)
			}
			text := p.text()
			parts := p.parts()
			var whole strings.Builder
			var bodies []string
			for _, x := range parts {
				whole.WriteString(x.Text)
				if x.Passage {
					bodies = append(bodies, x.Text)
				}
			}
			if whole.String() != text {
				t.Errorf("the parts do not rebuild the prompt")
			}
			if want := []string{sourceBody(a), sourceBody(b)}; !slices.Equal(bodies, want) {
				t.Errorf("passage parts %q, want %q", bodies, want)
			}
			until, ends, ok := p.untilQuestion()
			if !ok || !strings.HasPrefix(text, until) || !strings.HasPrefix(text[len(until):], " the question Question: again") {
				t.Errorf("read ahead %q (ok %v): not the prompt up to this turn's question", until, ok)
			}
			if len(ends) != 1 || !strings.HasSuffix(until[:ends[0]], sourceBody(b)) {
				t.Errorf("read ahead marks %v: want one, at the end of this turn's passage", ends)
			}
			if !strings.Contains(until, "[2] b.md › B") {
				t.Errorf("read ahead %q: this turn's passage is missing", until)
			}
		})
	}
}

func TestRestoreFor(t *testing.T) {
	p := passagesOf
	size := func(p retrieve.Passage) int { return p.Tokens }
	r := reuse{earlier: []earlierLayout{{p(10, 20), "a"}, {p(10, 20, 30), "b"}, {p(40), "c"}}}
	tests := []struct {
		name string
		turn []retrieve.Passage
		held int
		want string
	}{
		{"the longest shared start", p(10, 20, 30, 50), 0, "b"},
		{"only as far as the turn goes", p(10, 20), 0, "a"},
		{"a later passage in common counts for nothing", p(50, 40), 0, ""},
		{"not when a sequence's layout keeps as much", p(10, 20, 30), 300, ""},
		{"when it keeps more than the sequence's", p(10, 20, 30), 200, "b"},
		{"nothing kept", nil, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.restoreFor(tt.turn, size, tt.held); got != tt.want {
				t.Errorf("restoreFor = %q, want %q", got, tt.want)
			}
		})
	}
}
