//go:build !unix

package app

// openNonBlocking: no FIFOs to wait on in a folder here.
const openNonBlocking = 0
