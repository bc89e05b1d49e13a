package app

import (
	"fmt"
	"os"

	"lore/engine/llamarunner"
	"lore/index/parse"
)

// RunChild serves the child-process roles Lore's binaries re-execute
// themselves in: "runner" (one model, see engine) and "parse-worker"
// (risky document formats, see index/parse). It returns false when args
// name neither; otherwise it serves and exits the process.
func RunChild(args []string) bool {
	if len(args) < 2 {
		return false
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
	return false
}
