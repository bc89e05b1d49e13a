package app

import (
	"slices"
	"testing"

	"lore/engine"
)

func TestEarlierTurns(t *testing.T) {
	p := passagesOf
	var k earlierTurns
	var c1, c2 localChat = &engine.Model{}, &engine.Model{}
	turn := func(chat localChat, base string, name string, ps ...int64) earlierTurn {
		return earlierTurn{heldLayout: heldLayout{base: base, passages: p(ps...)}, chat: chat, name: name}
	}
	names := func(chat localChat, base string) []string {
		var r reuse
		k.layouts(chat, base, &r)
		var out []string
		for _, l := range r.earlier {
			out = append(out, l.name)
		}
		return out
	}
	k.kept(turn(c1, "x", "1", 10), []string{"1"})
	k.kept(turn(c2, "x", "2", 10), []string{"2"})
	k.kept(turn(c1, "x", "3", 20), []string{"3", "1"})
	k.kept(turn(c1, "y", "4", 20), []string{"4", "3", "1"})
	if got := names(c1, "x"); !slices.Equal(got, []string{"3", "1"}) {
		t.Errorf("layouts of c1 after x = %v, want [3 1]: newest first, another base or model left out", got)
	}
	// The same layout again is kept under its old name (the runner replaces
	// the state); a new layout gets a new name.
	if got := k.nameFor(c1, "x", p(20)); got != "3" {
		t.Errorf("name for 3's layout = %q, want 3", got)
	}
	n1, n2 := k.nameFor(c1, "x", p(30)), k.nameFor(c1, "x", p(30))
	if n1 == n2 || slices.Contains([]string{"1", "2", "3", "4"}, n1) {
		t.Errorf("names for a new layout: %q then %q, want new and different", n1, n2)
	}
	// The runner dropped 1 for room and kept 3 again, now the newest.
	k.kept(turn(c1, "x", "3", 20), []string{"3", "4"})
	if got := names(c1, "x"); !slices.Equal(got, []string{"3"}) {
		t.Errorf("after the runner dropped 1: %v, want [3]", got)
	}
	// A state the runner did not keep is not remembered.
	k.kept(turn(c1, "x", n1, 30), []string{"3", "4"})
	if got := names(c1, "x"); !slices.Equal(got, []string{"3"}) {
		t.Errorf("after a state not kept: %v, want [3]", got)
	}
	if got := names(c2, "x"); !slices.Equal(got, []string{"2"}) {
		t.Errorf("the other model's: %v, want [2]", got)
	}
	k.forget(c2)
	if got := names(c2, "x"); got != nil {
		t.Errorf("after forget: %v", got)
	}
}
