package llamarunner

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTextStream(t *testing.T) {
	euro := "€" // 3 bytes
	tests := []struct {
		name   string
		pieces []string
		stops  []string
		want   []string // emitted per push, then flush as last element
		stop   bool
	}{
		{"plain", []string{"a", "b"}, nil, []string{"a", "b", ""}, false},
		{"split rune", []string{euro[:1], euro[1:2], euro[2:] + "x"}, nil, []string{"", "", euro + "x", ""}, false},
		{"split 4-byte rune", []string{"😀"[:3], "😀"[3:]}, nil, []string{"", "😀", ""}, false},
		{"invalid byte replaced", []string{"a\xffb"}, nil, []string{"a\uFFFDb", ""}, false},
		{"stop inside piece", []string{"hello<|im_end|>junk"}, []string{"<|im_end|>"}, []string{"hello"}, true},
		{"stop across pieces", []string{"hi <|im", "_end|>"}, []string{"<|im_end|>"}, []string{"hi ", ""}, true},
		{"false alarm released", []string{"a <|i", "x"}, []string{"<|im_end|>"}, []string{"a ", "<|ix", ""}, false},
		{"held tail flushed", []string{"end <"}, []string{"<stop>"}, []string{"end ", "<"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewTextStream(tt.stops)
			var got []string
			stopped := false
			for _, p := range tt.pieces {
				out, st := s.Push(p)
				got = append(got, out)
				if st {
					stopped = true
					break
				}
			}
			if !stopped {
				got = append(got, s.Flush())
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			if stopped != tt.stop {
				t.Fatalf("stopped = %v, want %v", stopped, tt.stop)
			}
			for _, g := range got {
				if !utf8.ValidString(g) {
					t.Fatalf("emitted invalid UTF-8 %q", g)
				}
			}
		})
	}
}
