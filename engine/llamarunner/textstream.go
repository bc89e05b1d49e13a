package llamarunner

import (
	"strings"
	"unicode/utf8"
)

// TextStream turns raw token pieces into text that is safe to show: it never
// emits half a multi-byte character, and it holds back any tail that could be
// the start of a stop string, so a stop string never reaches the caller.
type TextStream struct {
	stops   []string
	pending string
}

// NewTextStream returns a stream that ends at the first of stops.
func NewTextStream(stops []string) *TextStream {
	var s []string
	for _, st := range stops {
		if st != "" {
			s = append(s, st)
		}
	}
	return &TextStream{stops: s}
}

// Push adds a piece and returns the text now safe to emit. stopped reports
// that a stop string was found; text after it is dropped.
func (t *TextStream) Push(piece string) (out string, stopped bool) {
	t.pending += piece
	// Keep an incomplete trailing rune for the next piece.
	cut := len(t.pending) - incompleteTail(t.pending)
	text := strings.ToValidUTF8(t.pending[:cut], "\uFFFD")
	rest := t.pending[cut:]

	for _, st := range t.stops {
		if i := strings.Index(text, st); i >= 0 {
			t.pending = ""
			return text[:i], true
		}
	}
	hold := 0
	for _, st := range t.stops {
		for n := min(len(st)-1, len(text)); n > hold; n-- {
			if strings.HasSuffix(text, st[:n]) {
				hold = n
				break
			}
		}
	}
	t.pending = text[len(text)-hold:] + rest
	return text[:len(text)-hold], false
}

// Flush returns whatever is held back, at the end of generation.
func (t *TextStream) Flush() string {
	out := strings.ToValidUTF8(t.pending, "\uFFFD")
	t.pending = ""
	return out
}

// incompleteTail is the length of a trailing byte sequence that starts a
// multi-byte rune but does not finish it (0 if none).
func incompleteTail(s string) int {
	for n := 1; n <= 3 && n <= len(s); n++ {
		b := s[len(s)-n]
		if b < 0x80 {
			return 0 // ASCII: complete
		}
		if utf8.RuneStart(b) {
			need := 0
			switch {
			case b&0xE0 == 0xC0:
				need = 2
			case b&0xF0 == 0xE0:
				need = 3
			case b&0xF8 == 0xF0:
				need = 4
			}
			if need > n {
				return n
			}
			return 0
		}
	}
	return 0
}
