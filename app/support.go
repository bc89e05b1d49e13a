package app

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"lore/store"
)

// Support is how well an answer is backed by the passages its prompt
// numbered, by a cheap lexical check (CheckSupport): no model, no
// embedding, so every answer gets one for free. It catches answers that
// wander off their sources; it cannot tell a paraphrase from a
// contradiction.
type Support struct {
	// Score is Supported/Sentences; nil when no sentence could be
	// checked (none long enough, or no passages to check against), which
	// is no verdict rather than a bad one.
	Score     *float64
	Sentences int // sentences checked
	Supported int // of them, those whose words mostly occur in their passages
	Uncited   int // of them, those citing no source (checked against every passage)
	Verdicts  []SentenceSupport
}

// SentenceSupport is the verdict on one checked sentence.
type SentenceSupport struct {
	Text  string
	Cites []int // the source numbers it cites, in order; none: uncited
	// BadCite: one of Cites names no source. Such a sentence is
	// unsupported whatever its words: the model made the source up.
	BadCite   bool
	Words     int // its distinct content words
	Found     int // of them, in its cited passages (in any, when uncited)
	Supported bool
}

const (
	// minSupportWords is the fewest content words a sentence needs to be
	// checked: "See [2]." or "I could not find it in the library." say
	// too little to match.
	minSupportWords = 2
	// supportShare is the share of a sentence's content words its passages
	// must hold for it to count as supported.
	supportShare = 0.5
	// maxCiteRange bounds a cited range such as [1-4], so that [1-99999]
	// costs nothing.
	maxCiteRange = 64
)

// CheckSupport scores answer against passages, the text of the prompt's
// sources in order (passages[0] is source [1]). The system prompt asks for
// a citation such as [1] or [2] after each sentence that uses a source, so
// each sentence is checked against the passages it cites: it is supported
// when at least half of its distinct content words (store.ContentWords,
// plurals folded) occur in them. A sentence without a citation is checked
// against all passages and counted as uncited; one that cites a source
// number the prompt did not have is unsupported. Sentences with fewer than
// minSupportWords content words are not checked.
func CheckSupport(answer string, passages []string) Support {
	var out Support
	if len(passages) == 0 {
		return out // nothing an answer could be supported by
	}
	vocab := make([]map[string]bool, len(passages))
	all := map[string]bool{}
	for i, p := range passages {
		vocab[i] = map[string]bool{}
		for _, w := range supportWords(p) {
			vocab[i][w] = true
			all[w] = true
		}
	}
	for _, s := range splitSentences(answer) {
		words := supportWords(s.text)
		if len(words) < minSupportWords {
			continue
		}
		v := SentenceSupport{Text: strings.TrimSpace(s.text), Cites: s.cites, Words: len(words)}
		has := func(w string) bool { return all[w] }
		if len(s.cites) == 0 {
			out.Uncited++
		} else {
			for _, n := range s.cites {
				if n < 1 || n > len(passages) {
					v.BadCite = true
				}
			}
			has = func(w string) bool {
				for _, n := range s.cites {
					if n >= 1 && n <= len(passages) && vocab[n-1][w] {
						return true
					}
				}
				return false
			}
		}
		for _, w := range words {
			if has(w) {
				v.Found++
			}
		}
		v.Supported = !v.BadCite && float64(v.Found) >= supportShare*float64(v.Words)
		out.Sentences++
		if v.Supported {
			out.Supported++
		}
		out.Verdicts = append(out.Verdicts, v)
	}
	if out.Sentences > 0 {
		score := math.Round(float64(out.Supported)/float64(out.Sentences)*1000) / 1000
		out.Score = &score
	}
	return out
}

// supportWords are text's distinct content words, plurals folded.
func supportWords(text string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range store.ContentWords(text) {
		w = singular(w)
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// singular folds the common English plural endings, crudely: the same
// rule on both sides is what matters, not the right word ("series" and
// "sery" meet either way).
func singular(w string) string {
	n := utf8.RuneCountInString(w)
	switch {
	case n > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case n > 4 && (strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "sses") || strings.HasSuffix(w, "xes")):
		return w[:len(w)-2]
	case n > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:len(w)-1]
	}
	return w
}

// citeRE matches a citation: [1], [1, 3], [2; 4], [1-3].
var citeRE = regexp.MustCompile(`\[\s*\d+(?:\s*[-–]\s*\d+)?(?:\s*[,;]\s*\d+(?:\s*[-–]\s*\d+)?)*\s*\]`)

// sentence is a piece of an answer and the source numbers it cites.
type sentence struct {
	text  string
	cites []int
}

// splitSentences cuts an answer into sentences: at ., ! or ? before a
// space, a citation or the end (not before a Markdown image's "![") (closing quotes, brackets and emphasis
// marks stay with the sentence), and at each line break (list items,
// headings). Citations are taken out of the text. One that opens a
// sentence belongs to the sentence before it: "… in May. [2] The …"
// cites [2] for May, as the prompt asks.
func splitSentences(answer string) []sentence {
	var out []sentence
	var cur strings.Builder
	var cites []int
	words := false // cur has a letter or digit
	end := func() {
		if words {
			out = append(out, sentence{text: cur.String(), cites: cites})
		}
		cur.Reset()
		cites, words = nil, false
	}
	matches := citeRE.FindAllStringIndex(answer, -1)
	for i := 0; i < len(answer); {
		if len(matches) > 0 && matches[0][0] == i {
			ns := parseCite(answer[i:matches[0][1]])
			if !words && len(out) > 0 {
				last := &out[len(out)-1]
				last.cites = append(last.cites, ns...)
			} else {
				cites = append(cites, ns...)
			}
			i = matches[0][1]
			matches = matches[1:]
			continue
		}
		r, size := utf8.DecodeRuneInString(answer[i:])
		cur.WriteString(answer[i : i+size])
		i += size
		switch {
		case r == '\n':
			end()
		case unicode.IsLetter(r) || unicode.IsNumber(r):
			words = true
		case r == '.' || r == '!' || r == '?':
			j := i
			next, size := utf8.DecodeRuneInString(answer[j:])
			for j < len(answer) && strings.ContainsRune(`"')]*_”’»`, next) {
				j += size
				next, size = utf8.DecodeRuneInString(answer[j:])
			}
			if j == len(answer) || unicode.IsSpace(next) || len(matches) > 0 && matches[0][0] == j {
				cur.WriteString(answer[i:j])
				i = j
				end()
			}
		}
	}
	end()
	return out
}

// parseCite reads the numbers of a citation citeRE matched. A range that
// runs backwards or too far yields 0, a number no source has.
func parseCite(c string) []int {
	var out []int
	for _, part := range strings.FieldsFunc(strings.Trim(c, "[] \t"), func(r rune) bool { return r == ',' || r == ';' }) {
		lo, hi, isRange := strings.Cut(strings.ReplaceAll(part, "–", "-"), "-")
		a, errA := strconv.Atoi(strings.TrimSpace(lo))
		if errA != nil {
			out = append(out, 0)
			continue
		}
		if !isRange {
			out = append(out, a)
			continue
		}
		b, errB := strconv.Atoi(strings.TrimSpace(hi))
		if errB != nil || b < a || b-a >= maxCiteRange {
			out = append(out, 0)
			continue
		}
		for n := a; n <= b; n++ {
			out = append(out, n)
		}
	}
	return out
}
