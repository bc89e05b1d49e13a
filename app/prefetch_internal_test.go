package app

import (
	"errors"
	"testing"

	"lore/index/retrieve"
)

// TestSpeculationRead: what a question can adopt of a draft's prompt is
// what the engine last said the sequence holds, and before its first
// report what the sequence held before; the passage being read counts
// for a draft's layout (reached) until the prefill ends.
func TestSpeculationRead(t *testing.T) {
	ps := []retrieve.Passage{{ChunkID: 1}, {ChunkID: 2}, {ChunkID: 3}}
	for _, c := range []struct {
		name          string
		held          int
		reported      bool
		from          int
		done          bool
		err           error
		read, reached int
	}{
		{name: "reported: inside the first", reported: true, read: 0, reached: 1},
		{name: "reported: two read", held: 2, reported: true, read: 2, reached: 3},
		{name: "reported: all", held: 3, reported: true, read: 3, reached: 3},
		{name: "reported: the runner cut back more than expected", reported: true, from: 1, read: 0, reached: 1},
		{name: "reported past a layout cut since", held: 5, reported: true, read: 3, reached: 3},
		{name: "stopped part-way: what it read", held: 2, reported: true, done: true, err: errors.New("preempted"), read: 2, reached: 3},
		{name: "finished", done: true, read: 3, reached: 3},
		{name: "before the first report: what it held before", from: 1, read: 1, reached: 2},
		{name: "stopped before any report", from: 2, done: true, err: errors.New("superseded"), read: 2, reached: 3},
	} {
		sp := &reading{heldLayout: heldLayout{passages: ps}, sizes: []int{100, 200, 150},
			from: c.from, held: c.held, reported: c.reported, done: c.done, err: c.err}
		if got := len(sp.read()); got != c.read {
			t.Errorf("%s: %d passages read, want %d", c.name, got, c.read)
		}
		if got := len(sp.reached()); got != c.reached {
			t.Errorf("%s: %d passages reached, want %d", c.name, got, c.reached)
		}
	}
}
