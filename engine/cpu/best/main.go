// Command best prints the runner variant to build for this CPU (what
// `lore cpu --best` prints). The Makefile runs it: it needs no cgo and no
// web UI, so it works on a fresh checkout.
package main

import (
	"fmt"

	"lore/engine/cpu"
)

func main() { fmt.Println(cpu.Best(cpu.Detect()).Name) }
