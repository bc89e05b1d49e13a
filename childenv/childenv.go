// Package childenv gives the environment Lore's child processes start with:
// this process's, without its secrets. The children (model runners, the
// parse worker and pdftotext reading untrusted files, the desktop's file
// opener) need none of them, and a child's environment can be read by
// anything that compromises it or reads /proc/PID/environ.
package childenv

import (
	"os"
	"strings"
)

// APIKey names the variable holding the remote servers' API key.
const APIKey = "LORE_API_KEY"

// Environ is os.Environ() without the secrets, for exec.Cmd.Env.
func Environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, APIKey+"=") {
			env = append(env, kv)
		}
	}
	return env
}
