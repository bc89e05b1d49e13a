package bench

import (
	"regexp"
	"strings"
	"time"
)

// The UI's prefetch rule (frontend/src/prefetch.ts), replayed so that
// `lore bench ttft` types as a user does: a draft of at least draftWords
// words is sent when a word has just been completed (a space or punctuation
// typed) or typing pauses draftIdle; never the same draft twice in a row.
// frontend/test/typing-cases.json holds cases both implementations pass.
const (
	draftIdle  = 250 * time.Millisecond
	draftWords = 3
)

var wordEnd = regexp.MustCompile(`[\s.,;:!?]$`)

// Send is a draft the UI sends, At after the first keystroke.
type Send struct {
	At    time.Duration
	Draft string
}

// Typing returns the drafts the UI sends while text is typed one character
// every gap, and when Enter comes (one gap after the last character).
func Typing(text string, gap time.Duration) (sends []Send, enter time.Duration) {
	last := ""
	runes := []rune(text)
	fire := func(at time.Duration, draft string) {
		if draft != last {
			last = draft
			sends = append(sends, Send{at, draft})
		}
	}
	for i := range runes {
		at := time.Duration(i+1) * gap
		typed := string(runes[:i+1])
		draft := strings.TrimSpace(typed)
		if len(strings.Fields(draft)) < draftWords {
			continue
		}
		if wordEnd.MatchString(typed) {
			fire(at, draft)
			continue
		}
		// A pause: the idle timer fires before the next key (or Enter).
		if gap >= draftIdle {
			fire(at+draftIdle, draft)
		}
	}
	return sends, time.Duration(len(runes)+1) * gap
}
