// Command lore-runner serves one model for the engine over its standard
// streams (see engine/wire). It is built once per CPU variant
// (lore-runner-avx2, lore-runner-avx512, …; see engine/cpu) and started by
// the engine, never by hand. It is a program of its own so that only it
// links llama.cpp, compiled for one instruction-set level.
package main

import "lore/engine/llamarunner"

func main() { llamarunner.Main() }
