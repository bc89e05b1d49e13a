//go:build amd64 && !purego

package vector

import "golang.org/x/sys/cpu"

// hasAVX2 is fixed at start-up, like the standard library's own feature
// checks.
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

func dot(a, b []float32) float32 {
	if hasAVX2 {
		return dotAVX2(a, b)
	}
	return dotGo(a, b)
}

// dotAVX2 is in dot_amd64.s. len(b) must be at least len(a).
//
//go:noescape
func dotAVX2(a, b []float32) float32
