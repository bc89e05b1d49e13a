package llamarunner

import (
	"fmt"
	"os"

	"lore/internal/stdio"
)

// Main runs a runner on this process's standard streams and exits. The
// engine starts it as lore-runner-<variant> (cmd/lore-runner).
func Main() {
	out, err := stdio.ProtocolOutput()
	if err != nil {
		fmt.Fprintln(os.Stderr, "runner:", err)
		os.Exit(2)
	}
	if err := Serve(os.Stdin, out); err != nil {
		fmt.Fprintln(os.Stderr, "runner:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
