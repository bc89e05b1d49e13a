package app

import (
	"errors"
	"testing"

	"lore/index/retrieve"
)

// TestSpeculationRead: what a question can adopt of a draft's prompt is
// what the engine last said it read (passages counted back from the
// prompt's end), and before its first report what the sequence held
// before.
func TestSpeculationRead(t *testing.T) {
	ps := []retrieve.Passage{{ChunkID: 1}, {ChunkID: 2}, {ChunkID: 3}}
	// A 50-token prefix, passages of 100, 200 and 150 tokens, the question mark.
	const total = 50 + 450 + questionMarkTokens
	for _, c := range []struct {
		name        string
		held, total int
		from        int
		done        bool
		err         error
		want        int
	}{
		{name: "measured: inside the first", held: 140, total: total, want: 0},
		{name: "measured: the first read", held: 150, total: total, want: 1},
		{name: "measured: a token short counts (tokenizer slack)", held: 349, total: total, want: 2},
		{name: "measured: all", held: 500, total: total, want: 3},
		{name: "measured: the runner cut back more than expected", held: 60, total: total, from: 1, want: 0},
		{name: "stopped part-way: what it read", held: 350, total: total, done: true, err: errors.New("preempted"), want: 2},
		{name: "finished", done: true, want: 3},
		{name: "before the first report: what it held before", from: 1, want: 1},
		{name: "stopped before any report", from: 2, done: true, err: errors.New("superseded"), want: 2},
	} {
		sp := &reading{heldLayout: heldLayout{passages: ps}, sizes: []int{100, 200, 150},
			from: c.from, held: c.held, total: c.total, done: c.done, err: c.err}
		if got := len(sp.read()); got != c.want {
			t.Errorf("%s: %d passages read, want %d", c.name, got, c.want)
		}
	}
}
