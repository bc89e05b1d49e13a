package synth

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"
)

//go:embed words.txt
var wordsTxt string

// SentencePiece token types (llama.cpp's llama_token_type).
const (
	tokNormal  = 1
	tokUnknown = 2
	tokControl = 3
	tokByte    = 6
)

const space = "▁" // SentencePiece's marker for a preceding space

// Special token ids, fixed in every vocabulary.
const (
	unkID     = 0
	bosID     = 1
	eosID     = 2
	imStartID = 259
	imEndID   = 260
	minVocab  = 512
)

type vocab struct {
	tokens []string
	scores []float32
	types  []int32
	index  map[string]bool
}

func (v *vocab) add(tok string, typ int32) bool {
	if v.index[tok] {
		return false
	}
	v.index[tok] = true
	v.tokens = append(v.tokens, tok)
	// SentencePiece merges the pair whose result scores highest: earlier
	// (more common) pieces win.
	v.scores = append(v.scores, -float32(len(v.tokens)))
	v.types = append(v.types, typ)
	return true
}

// piece adds tok with every prefix it needs: SentencePiece only merges through
// pieces that exist, so "▁hello" is reachable only if "▁h", "▁he", ... are too.
// It stops (false) once the vocabulary has n tokens.
func (v *vocab) piece(tok string, n int) bool {
	for i := range tok {
		if i == 0 {
			continue
		}
		if len(v.tokens) >= n {
			return false
		}
		v.add(tok[:i], tokNormal)
	}
	if len(v.tokens) >= n {
		return false
	}
	v.add(tok, tokNormal)
	return true
}

// words returns the embedded English list in order, without repeats.
func words() []string {
	var out []string
	seen := map[string]bool{}
	for line := range strings.Lines(wordsTxt) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		for _, w := range strings.Fields(line) {
			if !seen[w] {
				seen[w] = true
				out = append(out, w)
			}
		}
	}
	return out
}

// Go and general code tokens, and punctuation that prose and code use.
var (
	codeWords = strings.Fields(`func package import return if else for range switch case default go defer
struct interface map chan type var const nil true false err fmt Println Printf Sprintf Errorf errors New
ctx Context context string int int64 int32 uint64 float64 float32 bool byte rune len cap append make new copy
delete close panic recover main os io bufio strings strconv time http json sql bytes sync atomic Mutex
Lock Unlock WaitGroup Add Done Wait Read Write Close Open Create Err Error Is As Unwrap Background
WithCancel WithTimeout Handler HandlerFunc ResponseWriter Request ServeHTTP ListenAndServe Get Post
Marshal Unmarshal Encoder Decoder NewEncoder NewDecoder Encode Decode Reader Writer Scanner Scan Text
Join Split Fields Contains HasPrefix HasSuffix TrimSpace Trim ToLower ToUpper Replace Sprint Fprintf
Itoa Atoi ParseInt ParseFloat Now Since Duration Second Millisecond Sleep Tick Timer Ticker t tb
testing Test Benchmark Fatal Fatalf Errorf Helper Run Parallel Skip Log Logf TempDir Cleanup want got
tt tc tests cases name args input expected result res req resp buf data path dir file files line lines
id ids key keys value values val item items list node nodes index idx count size offset limit n i j k
self this def class print lambda None True False async await yield from let const function var export
public private static void null undefined println String Integer List Map TODO FIXME NOTE`)
	punct = strings.Fields(`. , ; : ! ? ' " ( ) [ ] { } < > = + - * / % & | ^ ~ @ # $ _ \ ` + "`" + `
:= == != <= >= && || -> => ++ -- += -= *= /= << >> ... .. // /* */ () {} [] (); ), ). ", ". ': ', '. ?" !"
). ), ]) }) ** __ ## ### #### --- ''' """ %s %d %v %w %q \n`)
	suffixes = strings.Fields(`s es ed d ing er ers est ly y ies ied tion tions sion ment ments ness able ible
al ally ity ive ous ful less ize ized izes ization ise ised ist ists ism ance ence ant ent ic ical ure ures
age ages ship ward wards wise like ish en ens ened ening or ors ory ary ery ry ty ia ian ial ion ions ate
ated ates ating ator ure ll ss th st nd rd ng nt ck ch sh ph gh qu`)
)

// buildVocab makes a SentencePiece ("llama") vocabulary of exactly n tokens:
// <unk> <s> </s>, the 256 byte fallbacks, the ChatML control tokens,
// characters, punctuation and suffixes, then English words (each with its
// prefixes), code tokens, inflections and word-internal pieces in order of
// usefulness, and made-up syllables if room remains. Later pieces drop out
// of small vocabularies.
func buildVocab(n int) (*vocab, error) {
	if n < minVocab {
		return nil, fmt.Errorf("vocabulary of %d tokens is below the minimum %d", n, minVocab)
	}
	v := &vocab{index: make(map[string]bool, n)}
	v.add("<unk>", tokUnknown)
	v.add("<s>", tokControl)
	v.add("</s>", tokControl)
	for b := range 256 {
		v.add(fmt.Sprintf("<0x%02X>", b), tokByte)
	}
	v.add("<|im_start|>", tokControl)
	v.add("<|im_end|>", tokControl)

	v.add(space, tokNormal)
	for _, c := range "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" {
		v.piece(string(c), n)
		v.piece(space+string(c), n)
	}
	for _, p := range punct {
		if p == `\n` {
			continue
		}
		v.piece(p, n)
		v.piece(space+p, n)
	}
	for i := 2; i <= 16; i *= 2 { // indentation
		v.piece(strings.Repeat(space, i), n)
	}

	ws := words()
	full := func() bool { return len(v.tokens) >= n }
	for _, p := range suffixes {
		v.piece(p, n)
	}
	// In order of use to English text: common words (capitalised too for the
	// commonest), code tokens, the rest of the words, their regular
	// inflections, pieces from inside words (so unlisted words split into a
	// few pieces rather than letters), capitalised forms, rarer inflections.
	const common, capitalised = 800, 300
	for i, w := range ws {
		if i == common {
			for _, c := range codeWords {
				v.piece(space+c, n)
				v.piece(c, n)
			}
		}
		if full() {
			return v, nil
		}
		v.piece(space+w, n)
		if i < capitalised {
			v.piece(space+title(w), n)
		}
	}
	inflected := func(suffixes ...string) {
		for _, w := range ws {
			for _, s := range suffixes {
				if f := inflect(w, s); f != "" && !full() {
					v.piece(space+f, n)
				}
			}
		}
	}
	inflected("s", "ed", "ing")
	for _, p := range innerPieces(ws) {
		if full() {
			break
		}
		v.piece(p, n)
	}
	for _, w := range ws[capitalised:] {
		if full() {
			break
		}
		v.piece(space+title(w), n)
	}
	inflected("er", "ly")
	for i := 0; !full(); i++ {
		v.piece(space+syllables(i), n)
	}
	return v, nil
}

// inflect adds an English suffix with the common spelling rules. It is a
// heuristic: a wrong form only costs a vocabulary slot.
func inflect(w, suffix string) string {
	if len(w) < 3 || strings.ContainsAny(w, "'-") || w != strings.ToLower(w) {
		return ""
	}
	last, prev := w[len(w)-1], w[len(w)-2]
	vowel := func(c byte) bool { return strings.IndexByte("aeiou", c) >= 0 }
	switch suffix {
	case "s":
		switch {
		case strings.HasSuffix(w, "s") || strings.HasSuffix(w, "x") || strings.HasSuffix(w, "z") ||
			strings.HasSuffix(w, "ch") || strings.HasSuffix(w, "sh"):
			return w + "es"
		case last == 'y' && !vowel(prev):
			return w[:len(w)-1] + "ies"
		}
		return w + "s"
	case "ly":
		switch {
		case last == 'y' && !vowel(prev):
			return w[:len(w)-1] + "ily"
		case strings.HasSuffix(w, "le"):
			return w[:len(w)-1] + "y"
		case strings.HasSuffix(w, "ly"):
			return ""
		}
		return w + "ly"
	}
	// ed, ing, er
	switch {
	case suffix == "ing" && strings.HasSuffix(w, "ie"):
		return w[:len(w)-2] + "ying"
	case suffix == "ing" && strings.HasSuffix(w, "ee"):
		return w + "ing"
	case last == 'e' && suffix == "ing":
		return w[:len(w)-1] + "ing"
	case last == 'e':
		return w + suffix[1:]
	case last == 'y' && !vowel(prev) && suffix != "ing":
		return w[:len(w)-1] + "i" + suffix
	case len(w) <= 4 && !vowel(w[0]) && vowel(prev) && !vowel(last) && !strings.ContainsRune("wxy", rune(last)) &&
		!vowel(w[len(w)-3]):
		return w + string(last) + suffix // stop -> stopped
	}
	return w + suffix
}

func title(w string) string {
	if w == "" || w[0] < 'a' || w[0] > 'z' {
		return w
	}
	return string(w[0]-'a'+'A') + w[1:]
}

// innerPieces lists substrings of 2-5 letters that occur inside words (not at
// the start), ordered by how many words contain them.
func innerPieces(ws []string) []string {
	count := map[string]int{}
	for _, w := range ws {
		for i := 1; i < len(w); i++ {
			for l := 2; l <= 5 && i+l <= len(w); l++ {
				count[w[i:i+l]]++
			}
		}
	}
	out := make([]string, 0, len(count))
	for p, c := range count {
		if c >= 2 && !strings.ContainsAny(p, "'") {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		if d := count[b] - count[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return out
}

// syllables spells i as a pronounceable made-up word: consonant-vowel pairs.
func syllables(i int) string {
	const cons, vow = "bcdfghklmnprstvwz", "aeiou"
	var b strings.Builder
	for {
		b.WriteByte(cons[i%len(cons)])
		i /= len(cons)
		b.WriteByte(vow[i%len(vow)])
		i /= len(vow)
		if i == 0 {
			return b.String()
		}
		i--
	}
}

// nonText returns the ids of the tokens that print nothing: <unk>, <s>, </s>
// and the chat markers.
func (v *vocab) nonText() []int {
	var ids []int
	for id, t := range v.types {
		if t == tokControl || t == tokUnknown {
			ids = append(ids, id)
		}
	}
	return ids
}
