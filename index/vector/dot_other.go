//go:build !amd64 || purego

package vector

func dot(a, b []float32) float32 { return dotGo(a, b) }
