//go:build !amd64

package cpu

// Detect reports no optional features: outside x86-64 there is one variant.
func Detect() Features { return Features{} }
