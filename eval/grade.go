// Package eval grades answers against labelled questions: whether a gold
// phrase occurs in the answer, whether an unanswerable question was
// declined, and which sources the answer cites. The labelled sets live
// beside this file (answers-*.jsonl; README.md).
package eval

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Kinds of question. An unanswerable one has no gold phrases and no
// relevant documents: the right answer declines.
const (
	KindFact         = "fact"
	KindHowTo        = "howto"
	KindNumber       = "number"
	KindUnanswerable = "unanswerable"
)

// Question is one line of an answer set.
type Question struct {
	Query    string   `json:"query"`
	Answers  []string `json:"answers"`  // gold phrases: any one found is right
	Relevant []string `json:"relevant"` // documents that state the answer, relative to the indexed folder
	Kind     string   `json:"kind"`
}

// Unanswerable says whether the library holds no answer to q.
func (q Question) Unanswerable() bool { return q.Kind == KindUnanswerable }

// ReadQuestions reads JSON lines of Question, refusing lines that could
// only be graded wrongly.
func ReadQuestions(r io.Reader) ([]Question, error) {
	var qs []Question
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		var q Question
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&q); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		switch {
		case strings.TrimSpace(q.Query) == "":
			return nil, fmt.Errorf("line %d: no query", n)
		case q.Kind != KindFact && q.Kind != KindHowTo && q.Kind != KindNumber && q.Kind != KindUnanswerable:
			return nil, fmt.Errorf("line %d: kind %q: want fact, howto, number or unanswerable", n, q.Kind)
		case q.Unanswerable() && (len(q.Answers) > 0 || len(q.Relevant) > 0):
			return nil, fmt.Errorf("line %d: an unanswerable question has no answers and no relevant documents", n)
		case !q.Unanswerable() && (len(q.Answers) == 0 || len(q.Relevant) == 0):
			return nil, fmt.Errorf("line %d: needs gold answers and relevant documents (or kind unanswerable)", n)
		}
		for _, a := range q.Answers {
			if normalize(a) == "" {
				return nil, fmt.Errorf("line %d: an empty gold answer", n)
			}
		}
		qs = append(qs, q)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(qs) == 0 {
		return nil, fmt.Errorf("no questions")
	}
	return qs, nil
}

// normalize lower-cases s and folds runs of white space to one space.
func normalize(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(s)), " ")
}

// Match reports whether any gold phrase occurs in answer, ignoring case and
// white space. A phrase that starts or ends with a letter or digit must not
// continue a word there ("50" is not found in "150").
func Match(answer string, gold []string) bool {
	a := normalize(answer)
	for _, g := range gold {
		g = normalize(g)
		for from := 0; g != ""; {
			i := strings.Index(a[from:], g)
			if i < 0 {
				break
			}
			i += from
			if bounded(a, i, i+len(g)) {
				return true
			}
			from = i + 1
		}
	}
	return false
}

func bounded(s string, i, j int) bool {
	word := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
	first, last := rune(s[i]), rune(s[j-1])
	if i > 0 && word(first) && word(rune(s[i-1])) {
		return false
	}
	if j < len(s) && word(last) && word(rune(s[j])) {
		return false
	}
	return true
}

// declines are what an answer says when the sources do not hold the
// answer (the system prompt asks for "could not find it in the library").
var declines = regexp.MustCompile(`(?i)(could ?n[o']t find|can ?n[o']t find|cannot find|unable to find|did ?n[o']t find|not (?:be )?found|no information|not (?:mentioned|stated|specified|provided|included|given)|(?:do|does) ?n[o']t (?:know|say|mention|contain|provide|specify)|not in the (?:library|sources|documents)|no (?:mention|answer)|there is no)`)

// Abstains reports whether answer declines to answer.
func Abstains(answer string) bool { return declines.MatchString(answer) }

var citation = regexp.MustCompile(`\[(\d{1,3})\]`)

// Citations returns the source numbers answer cites ([1], [2] …), each
// once, in order of first citation.
func Citations(answer string) []int {
	var out []int
	seen := map[int]bool{}
	for _, m := range citation.FindAllStringSubmatch(answer, -1) {
		n, _ := strconv.Atoi(m[1])
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
