package app

import (
	"fmt"
	"os"

	"lore/engine/llamarunner"
	"lore/index/parse"
)

// RunChild serves the child-process roles Lore's binaries re-execute
// themselves in: "runner" (one model, see engine) and "parse-worker"
// (risky document formats, see index/parse). When args name one it serves
// and exits the process; otherwise it returns at once.
func RunChild(args []string) {
	if len(args) < 2 {
		return
	}
	switch args[1] {
	case "runner":
		llamarunner.Main() // never returns
	case "parse-worker":
		if err := parse.ServeWorker(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "parse-worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}
