package app

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"lore/engine"
	"lore/index/retrieve"
	"lore/store"
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
	// segments are the prompt's text in pieces that say what each is: the
	// cacheable prefix, the passages and the question are found by index,
	// never by searching the rendered text.
	segments []segment
	passages []retrieve.Passage // every passage it holds, numbered in this order
	turn     []retrieve.Passage // those placed in this turn's message (a suffix of passages)
	// turnTokens is the tokens of turn's passages: what a model that holds
	// the conversation so far has left to read, besides the question;
	// sizes is each one's.
	turnTokens int
	sizes      []int
	// kept is how many of turn's passages (a prefix) come from a layout a
	// sequence already holds (see arrange); stale of those did not make
	// this question's own top passages; newTokens is the tokens of the
	// rest, what is left to read when the held layout was read. restore
	// names an earlier question's kept state that the prompt starts with
	// for more tokens than the held layout (reuse.earlier).
	kept, stale int
	restore     string
	newTokens   int
	late        int         // fitted passages left out to keep the first token within the budget (see reuse)
	cut         *PassageCut // the best passage, cut for the same reason
}

// segment is a piece of a prompt's text.
type segment struct {
	kind segKind
	text string
}

type segKind uint8

const (
	segFrame        segKind = iota // the template's text around the messages
	segSystem                      // the system prompt
	segHeading                     // sourcesHeading, before a turn's passages
	segNumber                      // a passage's number, "[n]"
	segPassage                     // a passage's body: where it is from and its text
	segQuestionMark                // questionMark
	segQuestion                    // the question, after the mark
	segAnswer                      // an earlier answer
	segOpaque                      // a template that reorders contents: the whole prompt, not cut up
)

// text is the prompt as the model reads it.
func (p prompt) text() string { return joined(p.segments) }

func joined(segs []segment) string {
	var b strings.Builder
	for _, s := range segs {
		b.WriteString(s.text)
	}
	return b.String()
}

// untilQuestion is the prompt up to this turn's question (the mark
// included): what reading ahead reads while the question is still being
// typed; ends are the byte offsets in it where each of the turn's passages
// ends (for the engine to say how many it holds). ok is false when the
// template does not keep the question last.
func (p prompt) untilQuestion() (text string, ends []int, ok bool) {
	i := len(p.segments) - 1
	for i >= 0 && p.segments[i].kind != segQuestionMark {
		i--
	}
	if i < 0 {
		return "", nil, false
	}
	at := 0
	for _, s := range p.segments[:i+1] {
		at += len(s.text)
		if s.kind == segPassage {
			ends = append(ends, at)
		}
	}
	// Earlier turns' passages come first: the turn's are the last.
	return joined(p.segments[:i+1]), ends[max(len(ends)-len(p.turn), 0):], true
}

// parts is the prompt cut around each passage's body, for stitching saved
// passage KV (nil if the template moved the bodies out of reach). A body's
// KV does not depend on its number, so it is saved once and stitched in
// under any number.
func (p prompt) parts() []engine.Part {
	var parts []engine.Part
	var b strings.Builder
	for _, s := range p.segments {
		switch s.kind {
		case segOpaque:
			return nil
		case segPassage:
			parts = append(parts, engine.Part{Text: b.String()}, engine.Part{Text: s.text, Passage: true})
			b.Reset()
		default:
			b.WriteString(s.text)
		}
	}
	return append(parts, engine.Part{Text: b.String()})
}

// turn is an earlier message of the chat, with the passages its prompt
// carried (user turns only).
type turn struct {
	engine.Message
	passages []retrieve.Passage
}

// tokenizer is the part of a chat model that assembly needs.
type tokenizer interface {
	CountTokens(ctx context.Context, text string) (int, error)
	Template() *engine.Template
	ID() string
}

// assemble builds the prompt for m, counting each passage's tokens with
// its tokenizer (counts are remembered per model and text, so a passage
// costs a runner round trip only the first time it is retrieved).
func (a *App) assemble(ctx context.Context, m tokenizer, history []turn, question string,
	passages []retrieve.Passage, budget int, r reuse) (prompt, error) {
	count := func(p retrieve.Passage) (int, error) {
		block := sourceBlock(0, p)
		key := m.ID() + "\x00" + block
		if n, ok := a.tokenCounts.get(key); ok {
			return n, nil
		}
		n, err := m.CountTokens(ctx, block)
		if err != nil {
			return 0, fmt.Errorf("count passage tokens: %w", err)
		}
		a.tokenCounts.put(key, n)
		return n, nil
	}
	return assemble(m.Template(), count, history, question, passages, budget, r)
}

// tokenCounts remembers passages' token counts per chat model (its own
// lock), at most maxTokenCounts of them.
type tokenCounts struct {
	mu sync.Mutex
	n  map[string]int
}

// maxTokenCounts bounds the remembered passage token counts.
const maxTokenCounts = 4096

func (c *tokenCounts) get(key string) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.n[key]
	return n, ok
}

func (c *tokenCounts) put(key string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil || len(c.n) >= maxTokenCounts {
		c.n = map[string]int{}
	}
	c.n[key] = n
}

// assemble lays the prompt out for prefix caching: the stable system prompt,
// then each earlier turn exactly as it was sent (its passages, its
// question, the answer), then this turn: the passages not already in the
// prompt, in the order arrange gives (what a sequence holds first, the
// rest by chunk id, so the same set gives the same bytes), and the
// question last. So a follow-up reuses the whole previous prompt, and a
// question asked again reuses all of it. This turn's passages are added
// best first until the budget is spent; passages earlier turns hold count
// against it, but this turn keeps at least half of it. count gives a
// passage's tokens (nil: the chunk's estimate).
func assemble(tmpl *engine.Template, count func(retrieve.Passage) (int, error), history []turn,
	question string, candidates []retrieve.Passage, budget int, r reuse) (prompt, error) {
	sizes := map[int64]int{}
	tokens := func(p retrieve.Passage) (int, error) {
		n := p.Tokens
		if count != nil {
			var err error
			if n, err = count(p); err != nil {
				return 0, err
			}
		}
		sizes[p.ChunkID] = n
		return n, nil
	}
	var all []retrieve.Passage
	inHistory := map[int64]bool{}
	used := 0
	for _, h := range history {
		for _, p := range h.passages {
			n, err := tokens(p)
			if err != nil {
				return prompt{}, err
			}
			all = append(all, p)
			inHistory[p.ChunkID] = true
			used += n
		}
	}
	historyTokens := used
	budget = max(budget-used, budget/2)
	var fit []retrieve.Passage
	used = 0
	for _, p := range candidates {
		if inHistory[p.ChunkID] {
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
			sizes[p.ChunkID] = n
		}
		fit = append(fit, p)
		used += n
	}
	size := func(p retrieve.Passage) int { return sizes[p.ChunkID] }
	lay := arrange(fit, nil, nil, size, 0)
	keptTokens := 0
	for _, h := range r.held { // the layout that keeps the most tokens already read
		var held []retrieve.Passage
		for _, p := range h {
			if inHistory[p.ChunkID] {
				break // the held layout was made for another conversation
			}
			if _, err := tokens(p); err != nil {
				return prompt{}, err
			}
			held = append(held, p)
		}
		l := arrange(fit, held, r.pool, size, budget/2)
		n := 0
		for _, p := range l.passages[:l.kept] {
			n += size(p)
		}
		if n > keptTokens {
			lay, keptTokens = l, n
		}
	}
	if read := readPrefix(lay.passages, r.read); (read > 0 || r.typed) && r.allowance != nil {
		read = max(read, readPrefix(lay.passages, [][]retrieve.Passage{r.answered}))
		start := r.start + historyTokens
		for _, p := range lay.passages[:read] {
			start += size(p)
		}
		cut := func(p retrieve.Passage, n int) (retrieve.Passage, *PassageCut, error) {
			was := size(p)
			c := cutPassage(p.Text, question, float64(n)/float64(was))
			if c == nil {
				return p, nil, nil
			}
			old := p.Text
			p.Text = c.apply(old)
			p.Tokens = was * len(p.Text) / len(old) // the estimate, without a tokenizer
			m, err := tokens(p)
			c.ChunkID, c.Tokens = p.ChunkID, max(was-m, 0)
			return p, c, err
		}
		var err error
		if lay, err = lay.trimUnread(read, fit, size, cut, max(r.allowance(start), 1)); err != nil {
			return prompt{}, err
		}
	}

	segs, err := render(tmpl, history, lay.passages, question)
	if err != nil {
		return prompt{}, err
	}
	p := prompt{segments: segs, passages: append(all, lay.passages...), turn: lay.passages, kept: lay.kept, stale: lay.stale,
		late: lay.late, cut: lay.cut, restore: r.restoreFor(lay.passages, size, keptTokens)}
	for i, q := range lay.passages {
		p.sizes = append(p.sizes, sizes[q.ChunkID])
		p.turnTokens += sizes[q.ChunkID]
		if i >= lay.kept {
			p.newTokens += sizes[q.ChunkID]
		}
	}
	return p, nil
}

// render lays the conversation out as segments in tmpl's format: the system
// prompt, each earlier turn as it was sent (its passages numbered on from
// the turns before), and this turn's passages and question last.
func render(tmpl *engine.Template, history []turn, passages []retrieve.Passage, question string) ([]segment, error) {
	contents := [][]segment{{{segSystem, systemPrompt}}}
	n := 0
	userTurn := func(ps []retrieve.Passage, q string) []segment {
		var c []segment
		if len(ps) > 0 {
			c = append(c, segment{segHeading, sourcesHeading})
			for _, p := range ps {
				n++
				c = append(c, segment{segNumber, sourceNumber(n)}, segment{segPassage, sourceBody(p)})
			}
		}
		return append(c, segment{segQuestionMark, questionMark}, segment{segQuestion, " " + q})
	}
	msgs := []engine.Message{{Role: "system", Content: systemPrompt}}
	add := func(role string, c []segment) {
		contents = append(contents, c)
		msgs = append(msgs, engine.Message{Role: role, Content: joined(c)})
	}
	for _, h := range history {
		if h.Role == "user" {
			add("user", userTurn(h.passages, h.Content))
		} else {
			add(h.Role, []segment{{segAnswer, h.Content}})
		}
	}
	add("user", userTurn(passages, question))
	text, err := tmpl.Render(msgs)
	if err != nil {
		return nil, err
	}
	frame, err := tmpl.Frame(msgs)
	if err != nil {
		return []segment{{segOpaque, text}}, nil
	}
	var segs []segment
	for i, c := range contents {
		segs = append(segs, segment{segFrame, frame[i]})
		segs = append(segs, c...)
	}
	segs = append(segs, segment{segFrame, frame[len(contents)]})
	if joined(segs) != text { // the template rewrites a content (one left empty, say)
		return []segment{{segOpaque, text}}, nil
	}
	return segs, nil
}

// reuse is the layouts of this turn's passages that sequences of the chat
// model already hold (or are reading), after the same conversation, and
// the question's candidates: a held passage among them may keep its place.
type reuse struct {
	held [][]retrieve.Passage // layouts, each in prompt order
	pool []retrieve.Passage
	// read are the layouts (or their first passages) the drafts have read.
	// When the question was typed (drafts of it were prefetched) or the
	// prompt starts with a read layout, allowance (nil: none) caps the
	// tokens of this turn's passages left to read after it, from the
	// prompt position they start at: the first token is due within a
	// budget, and what the user's drafts have read carries the answer's
	// context. start is about where this turn's passages would begin
	// without the earlier turns' passages (the system prefix and the
	// earlier questions and answers).
	read      [][]retrieve.Passage
	typed     bool
	allowance func(start int) int
	start     int
	answered  []retrieve.Passage // the answer sequence's layout, read too
	// earlier are earlier questions' layouts whose states the runner keeps
	// (earlierTurns). The prompt is never laid out for them: another chat's
	// passages first would change this question's prompt, and on SmolLM2
	// that lost answers (docs/performance.md). A prompt that starts with
	// one's passages anyway restores its state.
	earlier []earlierLayout
}

// earlierLayout is the layout of an earlier question's kept state.
type earlierLayout struct {
	passages []retrieve.Passage
	name     string
}

// restoreFor names the kept state whose layout turn starts with for the
// most tokens, more than held (what a sequence's layout keeps); "" if none.
func (r reuse) restoreFor(turn []retrieve.Passage, size func(retrieve.Passage) int, held int) string {
	name := ""
	for _, k := range r.earlier {
		n := 0
		for i := 0; i < min(len(turn), len(k.passages)) && turn[i].ChunkID == k.passages[i].ChunkID; i++ {
			n += size(turn[i])
		}
		if n > held {
			name, held = k.name, n
		}
	}
	return name
}

// layout is a turn's passages in prompt order.
type layout struct {
	passages []retrieve.Passage
	held     []retrieve.Passage // the held layout it starts with
	// kept is how many (a prefix) came from the held layout, stale how
	// many of those are not among the passages fitted for this question,
	// late how many fitted ones were left out, cut what was cut of the best
	// one (trimUnread).
	kept, stale, late int
	cut               *PassageCut
}

// arrange orders a turn's passages so that the prompt starts with what a
// sequence already holds: the held passages first, in their order, for as
// long as each is still among the question's candidates (pool) and those
// that did not make its own fitted set (stale) cost at most maxStale tokens
// in all; then the fitted passages not yet placed, by chunk id. Every
// fitted passage is in the prompt, so reuse never costs the answer a
// source; it costs at most maxStale tokens of context. Drafts typed one
// word after another mostly keep their passages, so each draft's prefill
// extends the last one instead of starting over at the first passage that
// changed, and on Enter only the passages the last words brought are left
// to read.
func arrange(fit, held, pool []retrieve.Passage, tokens func(retrieve.Passage) int, maxStale int) layout {
	inFit := map[int64]bool{}
	for _, p := range fit {
		inFit[p.ChunkID] = true
	}
	inPool := map[int64]bool{}
	for _, p := range pool {
		inPool[p.ChunkID] = true
	}
	out := layout{held: held}
	placed := map[int64]bool{}
	staleTokens := 0
	for _, p := range held {
		if placed[p.ChunkID] || !inPool[p.ChunkID] && !inFit[p.ChunkID] {
			break
		}
		if !inFit[p.ChunkID] {
			if staleTokens+tokens(p) > maxStale {
				break
			}
			staleTokens += tokens(p)
			out.stale++
		}
		out.passages = append(out.passages, p)
		placed[p.ChunkID] = true
	}
	// Trailing stale passages buy nothing: what follows them is read anyway.
	for out.stale > 0 && !inFit[out.passages[len(out.passages)-1].ChunkID] {
		out.passages = out.passages[:len(out.passages)-1]
		out.stale--
	}
	out.kept = len(out.passages)
	var rest []retrieve.Passage
	for _, p := range fit {
		if !placed[p.ChunkID] {
			rest = append(rest, p)
		}
	}
	out.passages = append(out.passages, rest...)
	return out
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

// questionMark is where a turn's question begins: reading ahead reads
// everything before it (prompt.untilQuestion).
const questionMark = "Question:"

// sourcesHeading opens a turn's sources.
const sourcesHeading = "Sources:\n\n"

func sourceNumber(n int) string { return fmt.Sprintf("[%d]", n) }

// sourceBlock is one passage as the model sees it.
func sourceBlock(n int, p retrieve.Passage) string {
	return sourceNumber(n) + sourceBody(p)
}

// sourceBody is a passage after its number: where it is from, and its text.
func sourceBody(p retrieve.Passage) string {
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
	return fmt.Sprintf(" %s\n%s\n\n", loc, strings.TrimSpace(p.Text))
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

// trimUnread leaves out passages the layout has left to read after its
// first read ones until the rest fits in allowance tokens: stale passages
// first, then fitted ones from the worst ranked (fit is best first). The
// question's best passage always stays; when it alone is over the
// allowance, cut(p, n) shortens it to about n tokens, at least minCut.
func (l layout) trimUnread(read int, fit []retrieve.Passage, size func(retrieve.Passage) int,
	cut func(retrieve.Passage, int) (retrieve.Passage, *PassageCut, error), allowance int) (layout, error) {
	unread := map[int64]bool{}
	left := 0
	for _, p := range l.passages[read:] {
		unread[p.ChunkID] = true
		left += size(p)
	}
	if left <= allowance {
		return l, nil
	}
	inFit := map[int64]bool{}
	for _, p := range fit {
		inFit[p.ChunkID] = true
	}
	var order []retrieve.Passage // what goes first
	for _, p := range l.passages[read:] {
		if !inFit[p.ChunkID] {
			order = append(order, p)
		}
	}
	for i := len(fit) - 1; i > 0; i-- {
		order = append(order, fit[i])
	}
	drop := map[int64]bool{}
	for _, p := range order {
		if left <= allowance {
			break
		}
		if unread[p.ChunkID] && !drop[p.ChunkID] {
			drop[p.ChunkID] = true
			left -= size(p)
			if inFit[p.ChunkID] {
				l.late++
			}
		}
	}
	out := layout{held: l.held, late: l.late}
	for _, p := range l.passages {
		if drop[p.ChunkID] {
			continue
		}
		cutHere := false
		if over := left - allowance; over > 0 && len(fit) > 0 && p.ChunkID == fit[0].ChunkID && unread[p.ChunkID] {
			if n := max(size(p)-over, minCut); n < size(p) {
				var err error
				if p, out.cut, err = cut(p, n); err != nil {
					return l, err
				}
				cutHere = out.cut != nil
			}
		}
		// A cut passage is not the text a sequence holds: the kept prefix
		// ends before it.
		if !cutHere && len(out.passages) == out.kept && out.kept < len(l.held) && l.held[out.kept].ChunkID == p.ChunkID {
			out.kept++
		}
		if !inFit[p.ChunkID] {
			out.stale++
		}
		out.passages = append(out.passages, p)
	}
	return out, nil
}

// readPrefix is how many of passages (a prefix) one of the read layouts
// holds, the most of any.
func readPrefix(passages []retrieve.Passage, read [][]retrieve.Passage) int {
	best := 0
	for _, r := range read {
		n := 0
		for n < min(len(r), len(passages)) && r[n].ChunkID == passages[n].ChunkID {
			n++
		}
		best = max(best, n)
	}
	return best
}

// minCut is the fewest tokens the best passage is cut to.
const minCut = 64

// PassageCut is the part of a passage a prompt kept when it cut the
// passage to keep the first-token budget: Words words from word From
// (splitWords), Tokens fewer than the whole. Traces record it so that a
// follow-up renders the turn as it was sent.
type PassageCut struct {
	ChunkID int64 `json:"chunk_id"`
	From    int   `json:"from"`
	Words   int   `json:"words"`
	Tokens  int   `json:"tokens"`
}

// cutPassage picks the run of about frac of text's words that holds the
// most of the question's search words (each counted once, then all their
// occurrences; the first such run), so a passage cut to answer fast keeps
// what the question asks about. It is nil when nothing would be cut.
func cutPassage(text, question string, frac float64) *PassageCut {
	words := splitWords(text)
	keep := max(int(float64(len(words))*frac), 1)
	if keep >= len(words) {
		return nil
	}
	terms := map[string]bool{}
	for _, w := range store.QueryWords(question) {
		terms[w] = true
	}
	term := make([]string, len(words)) // the question's word each word is, or ""
	for i, w := range words {
		for _, f := range store.QueryWords(w) {
			if terms[f] {
				term[i] = f
				break
			}
		}
	}
	count := map[string]int{}
	distinct, hits := 0, 0
	add := func(i, d int) {
		if t := term[i]; t != "" {
			if count[t] == 0 {
				distinct++
			}
			count[t] += d
			if count[t] == 0 {
				distinct--
			}
			hits += d
		}
	}
	best, bestScore := 0, -1
	for i := range words {
		add(i, 1)
		if i >= keep {
			add(i-keep, -1)
		}
		if i >= keep-1 {
			if score := distinct*len(words) + hits; score > bestScore {
				best, bestScore = i-keep+1, score
			}
		}
	}
	return &PassageCut{From: best, Words: keep}
}

// apply cuts text as c says; "…" marks what is left out.
func (c *PassageCut) apply(text string) string {
	words := splitWords(text)
	from := min(c.From, len(words))
	to := min(from+c.Words, len(words))
	out := strings.TrimSpace(strings.Join(words[from:to], ""))
	if from > 0 {
		out = "… " + out
	}
	if to < len(words) {
		out += " …"
	}
	return out
}

// longWord is the most runes one of splitWords' words holds: text without
// spaces (CJK, a long URL) can be cut too.
const longWord = 16

// splitWords splits text into words, each with the spacing after it, so
// that a run of them reads as written.
func splitWords(text string) []string {
	var out []string
	for rest := text; rest != ""; {
		end := strings.IndexFunc(rest, unicode.IsSpace)
		if end < 0 {
			end = len(rest)
		}
		spaced := end + len(rest[end:]) - len(strings.TrimLeftFunc(rest[end:], unicode.IsSpace))
		word := rest[:spaced]
		for utf8.RuneCountInString(word[:end]) > longWord {
			i := 0
			for range longWord {
				_, size := utf8.DecodeRuneInString(word[i:])
				i += size
			}
			out = append(out, word[:i])
			word, end = word[i:], end-i
		}
		out = append(out, word)
		rest = rest[spaced:]
	}
	return out
}
