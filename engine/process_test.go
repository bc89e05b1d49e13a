package engine

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"lore/childenv"
)

// TestRunnerGetsNoAPIKey: the runner reads model files, which may be
// hostile; it starts without the remote servers' API key.
func TestRunnerGetsNoAPIKey(t *testing.T) {
	t.Setenv(childenv.APIKey, "sk-secret")
	t.Setenv("LORE_PROBE", "kept")
	prog := filepath.Join(t.TempDir(), "runner.sh")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\nenv >&2\necho done >&2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var env []string
	p, err := startProcess(prog, func(line string) {
		mu.Lock()
		env = append(env, line)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	<-p.dead // stderr is read to the end before the process counts as dead
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(env, "\n")
	if strings.Contains(all, "sk-secret") {
		t.Errorf("the runner's environment holds the API key")
	}
	if !strings.Contains(all, "LORE_PROBE=kept") {
		t.Errorf("the runner lost the rest of its environment:\n%s", all)
	}
}
