package engine

import "testing"

// TestSpeculationSwitch: below the floor over a full window speculation
// goes off for a backoff that doubles while it keeps failing, and a
// window above the floor resets it.
func TestSpeculationSwitch(t *testing.T) {
	var s speculation
	offFor := func() int {
		n := 0
		for {
			if k, _ := s.allow(4); k > 0 {
				return n
			}
			n++
		}
	}
	if k, note := s.allow(4); k != 4 || note != "" {
		t.Fatalf("fresh: %d %q", k, note)
	}
	if r := s.record(16, 2, 0.6); r != -1 {
		t.Errorf("16 drafted: rate %v, want unknown below half a window", r)
	}
	if r := s.record(48, 6, 0.6); r != 0.125 {
		t.Errorf("64 drafted, 8 kept: rate %v", r)
	}
	if n := offFor(); n != specBackoff {
		t.Errorf("off for %d answers, want %d", n, specBackoff)
	}
	s.record(64, 0, 0.6)
	if n := offFor(); n != 2*specBackoff {
		t.Errorf("failing again: off for %d answers, want %d", n, 2*specBackoff)
	}
	if r := s.record(64, 60, 0.6); r < 0.9 {
		t.Errorf("a good window: rate %v", r)
	}
	if k, _ := s.allow(4); k != 4 {
		t.Errorf("after a good window: %d", k)
	}
	s.record(64, 0, 0.6)
	if n := offFor(); n != specBackoff {
		t.Errorf("after a good window the backoff starts afresh: off for %d, want %d", n, specBackoff)
	}
}
