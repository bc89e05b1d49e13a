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
	passages []retrieve.Passage // those that fit, in prompt order
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
func (a *App) assemble(ctx context.Context, m tokenizer, history []engine.Message, question string,
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
// then the passages (in a stable order, so a follow-up that retrieves the same
// passages reuses their KV), then the conversation so far, the question last.
// Passages are added best first until the token budget is spent.
// count gives a passage's tokens (nil: the chunk's estimate).
func assemble(tmpl *engine.Template, count func(retrieve.Passage) (int, error), history []engine.Message,
	question string, passages []retrieve.Passage, budget int) (prompt, error) {
	var fit []retrieve.Passage
	used := 0
	for _, p := range passages {
		n := p.Tokens
		if count != nil {
			var err error
			if n, err = count(p); err != nil {
				return prompt{}, err
			}
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
	// Stable order: by chunk id, so the same set of passages gives the same
	// bytes whatever their scores.
	ordered := slices.Clone(fit)
	slices.SortFunc(ordered, func(a, b retrieve.Passage) int { return cmp.Compare(a.ChunkID, b.ChunkID) })

	var b strings.Builder
	if len(ordered) > 0 {
		b.WriteString("Sources:\n\n")
		for i, p := range ordered {
			b.WriteString(sourceBlock(i+1, p))
		}
	}
	msgs := []engine.Message{{Role: "system", Content: systemPrompt}}
	first := true
	for _, m := range history {
		if first && m.Role == "user" && b.Len() > 0 {
			m.Content = b.String() + m.Content
			first = false
		}
		msgs = append(msgs, m)
	}
	q := "Question: " + question
	if first && b.Len() > 0 {
		q = b.String() + q
	}
	msgs = append(msgs, engine.Message{Role: "user", Content: q})
	text, err := tmpl.Render(msgs)
	if err != nil {
		return prompt{}, err
	}
	return prompt{text: text, passages: ordered}, nil
}

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
	return fmt.Sprintf("[%d] %s\n%s\n\n", n, loc, strings.TrimSpace(p.Text))
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
