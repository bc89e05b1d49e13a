package app

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"lore/engine"
	"lore/index/retrieve"
)

// PromptVersion changes whenever the prompt's wording or layout changes, so
// a latency or quality regression can be tied to it (it is part of
// version_id).
const PromptVersion = "p1"

// systemPrompt is byte-identical in every request: its KV is computed once,
// at model load, and reused by every question.
const systemPrompt = `You are Lore, an assistant that answers questions from the user's own documents.
Answer only from the numbered sources given with the question. After each sentence that uses a source, cite it as [1], [2].
If the sources do not contain the answer, say that you could not find it in the library. Be brief.`

// prompt is an assembled prompt and what went into it.
type prompt struct {
	text     string
	passages []retrieve.Passage // every passage it holds, numbered in this order
	turn     []retrieve.Passage // those placed in this turn's message (a suffix of passages)
	// turnTokens is the tokens of turn's passages: what a model that holds
	// the conversation so far has left to read, besides the question.
	turnTokens int
	// parts is text cut around each passage's body, for stitching saved
	// passage KV (nil if the template moved the bodies out of reach).
	parts []engine.Part
}

// turn is an earlier message of the chat, with the passages its prompt
// carried (user turns only).
type turn struct {
	engine.Message
	passages []retrieve.Passage
}

// tokenizer is the part of a chat model that assembly needs.
type tokenizer interface {
	Tokenize(ctx context.Context, text string, special bool) ([]int, error)
	Template() *engine.Template
	ID() string
}

// assemble builds the prompt for m, counting each passage's tokens with
// its tokenizer (counts are remembered per model and text, so a passage
// costs a runner round trip only the first time it is retrieved).
func (a *App) assemble(ctx context.Context, m tokenizer, history []turn, question string,
	passages []retrieve.Passage, budget int) (prompt, error) {
	count := func(p retrieve.Passage) (int, error) {
		block := sourceBlock(0, p)
		key := m.ID() + "\x00" + block
		a.mu.Lock()
		n, ok := a.tokenCounts[key]
		a.mu.Unlock()
		if ok {
			return n, nil
		}
		toks, err := m.Tokenize(ctx, block, false)
		if err != nil {
			return 0, fmt.Errorf("count passage tokens: %w", err)
		}
		a.mu.Lock()
		if len(a.tokenCounts) >= maxTokenCounts {
			clear(a.tokenCounts)
		}
		a.tokenCounts[key] = len(toks)
		a.mu.Unlock()
		return len(toks), nil
	}
	return assemble(m.Template(), count, history, question, passages, budget)
}

// maxTokenCounts bounds the remembered passage token counts.
const maxTokenCounts = 4096

// assemble lays the prompt out for prefix caching: the stable system prompt,
// then each earlier turn exactly as it was sent (its passages, its
// question, the answer), then this turn: the passages not already in the
// prompt, in a stable order (by chunk id, so the same set gives the same
// bytes), and the question last. So a follow-up reuses the whole previous
// prompt, and a question asked again reuses all of it. This turn's passages
// are added best first until the budget is spent; passages earlier turns
// hold count against it, but this turn keeps at least half of it.
// count gives a passage's tokens (nil: the chunk's estimate).
func assemble(tmpl *engine.Template, count func(retrieve.Passage) (int, error), history []turn,
	question string, candidates []retrieve.Passage, budget int) (prompt, error) {
	tokens := func(p retrieve.Passage) (int, error) {
		if count == nil {
			return p.Tokens, nil
		}
		return count(p)
	}
	var all []retrieve.Passage
	held := map[int64]bool{}
	used := 0
	for _, h := range history {
		for _, p := range h.passages {
			n, err := tokens(p)
			if err != nil {
				return prompt{}, err
			}
			all = append(all, p)
			held[p.ChunkID] = true
			used += n
		}
	}
	budget = max(budget-used, budget/2)
	var fit []retrieve.Passage
	used = 0
	for _, p := range candidates {
		if held[p.ChunkID] {
			continue // already in the prompt, under its earlier number
		}
		n, err := tokens(p)
		if err != nil {
			return prompt{}, err
		}
		if used+n > budget && len(fit) > 0 {
			continue // a shorter passage further down may still fit
		}
		if used+n > budget {
			p.Text = truncateWords(p.Text, budget)
			n = budget
		}
		fit = append(fit, p)
		used += n
	}
	slices.SortFunc(fit, func(a, b retrieve.Passage) int { return cmp.Compare(a.ChunkID, b.ChunkID) })

	msgs := []engine.Message{{Role: "system", Content: systemPrompt}}
	n := 0
	userTurn := func(ps []retrieve.Passage, q string) engine.Message {
		var b strings.Builder
		if len(ps) > 0 {
			b.WriteString(sourcesHeading)
			for _, p := range ps {
				n++
				b.WriteString(sourceBlock(n, p))
			}
		}
		b.WriteString(questionMark + " " + q)
		return engine.Message{Role: "user", Content: b.String()}
	}
	for _, h := range history {
		if h.Role == "user" {
			msgs = append(msgs, userTurn(h.passages, h.Content))
		} else {
			msgs = append(msgs, h.Message)
		}
	}
	msgs = append(msgs, userTurn(fit, question))
	text, err := tmpl.Render(msgs)
	if err != nil {
		return prompt{}, err
	}
	all = append(all, fit...)
	return prompt{text: text, passages: all, turn: fit, turnTokens: used, parts: splitParts(text, all)}, nil
}

// splitParts cuts text around each passage's body (its source block after
// the "[n]" number), in prompt order. A body's KV does not depend on its
// number, so it can be saved once and stitched in under any number.
func splitParts(text string, passages []retrieve.Passage) []engine.Part {
	var parts []engine.Part
	at := 0
	for i, p := range passages {
		block := sourceBlock(i+1, p)
		j := strings.Index(text[at:], block)
		if j < 0 {
			return nil
		}
		num := len(sourceNumber(i + 1))
		body := block[num:]
		parts = append(parts, engine.Part{Text: text[at : at+j+num]}, engine.Part{Text: body, Passage: true})
		at += j + len(block)
	}
	return append(parts, engine.Part{Text: text[at:]})
}

// passagePrefix is the text every passage's KV is evaluated after: the
// system turn and a first user turn up to the first source's number. In a
// first question the first passage stands exactly there.
func passagePrefix(tmpl *engine.Template) (string, error) {
	p, err := tmpl.Prefix(systemPrompt)
	if err != nil {
		return "", err
	}
	return p + sourcesHeading + sourceNumber(1), nil
}

// sourcesHeading opens a turn's sources.
const sourcesHeading = "Sources:\n\n"

func sourceNumber(n int) string { return fmt.Sprintf("[%d]", n) }

// sourceBlock is one passage as the model sees it.
func sourceBlock(n int, p retrieve.Passage) string {
	loc := p.Rel
	if loc == "" {
		loc = p.Path
	}
	if p.Heading != "" {
		loc += " › " + p.Heading
	}
	if p.Page > 0 {
		loc += fmt.Sprintf(" (page %d)", p.Page)
	} else if p.LineStart > 0 {
		loc += fmt.Sprintf(" (lines %d–%d)", p.LineStart, p.LineEnd)
	}
	return fmt.Sprintf("%s %s\n%s\n\n", sourceNumber(n), loc, strings.TrimSpace(p.Text))
}

// truncateWords keeps about n tokens' worth of words (a token is ~0.75 words).
func truncateWords(s string, n int) string {
	w := strings.Fields(s)
	keep := max(n*3/4, 1)
	if len(w) <= keep {
		return s
	}
	return strings.Join(w[:keep], " ") + " …"
}

// extractive is the answer given when no generation model is available:
// the best passages, quoted and labelled.
func extractive(passages []retrieve.Passage, reason string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**Extractive answer** (%s): the most relevant passages from your library.\n\n", reason)
	if len(passages) == 0 {
		b.WriteString("Nothing in this workspace matches the question.\n")
	}
	for i, p := range passages {
		if i == 3 {
			break
		}
		fmt.Fprintf(&b, "> %s [%d]\n\n", strings.ReplaceAll(strings.TrimSpace(truncateWords(p.Text, 80)), "\n", "\n> "), i+1)
	}
	return b.String()
}
