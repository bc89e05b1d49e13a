package main

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestHousePlan holds the packages to their layers: data flows files →
// index → store and question → app → engine, and the front doors only
// translate. A new import that crosses a layer fails here, not in review.
func TestHousePlan(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps=false", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "lore/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		deps[f[0]] = f[1:]
	}
	rules := []struct {
		pkgs   string   // a package path prefix
		forbid []string // import path prefixes it must not depend on, even indirectly
	}{
		{"lore/engine", []string{"lore/store", "lore/index", "lore/app", "lore/bench"}},
		{"lore/store", []string{"lore/"}},
		{"lore/index", []string{"lore/app", "lore/engine/llamarunner", "lore/bench"}},
		{"lore/app", []string{"github.com/wailsapp/", "lore/engine/llamarunner", "github.com/ollama/ollama/llama", "lore/bench"}},
		{"lore/frontend", []string{"lore/"}},
		// Fetching model files and grading answers are tools beside the
		// layers: they reach nothing of Lore's.
		{"lore/weights", []string{"lore/"}},
		{"lore/eval", []string{"lore/"}},
	}
	checked := 0
	for pkg, ds := range deps {
		for _, r := range rules {
			if pkg != r.pkgs && !strings.HasPrefix(pkg, r.pkgs+"/") {
				continue
			}
			checked++
			for _, d := range ds {
				if slices.ContainsFunc(r.forbid, func(f string) bool { return strings.HasPrefix(d, f) }) {
					t.Errorf("%s depends on %s", pkg, d)
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d packages checked: go list output changed? %q", checked, out[:min(len(out), 300)])
	}

	// The desktop shell and the CLI reach nothing below the app service
	// but the tools beside it (model files, grading); benchmarks and
	// test-model tools (bench*.go, synth.go) may.
	front := map[string]bool{"lore/app": true, "lore/app/server": true, "lore/app/telemetry": true, "lore/frontend": true, "lore/bench": true,
		"lore/weights": true, "lore/eval": true}
	for _, dir := range []string{".", "cmd/lore"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, file := range files {
			base := filepath.Base(file)
			if strings.HasSuffix(base, "_test.go") || strings.HasPrefix(base, "bench") || base == "synth.go" {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, im := range f.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				if strings.HasPrefix(p, "lore/") && !front[p] {
					t.Errorf("%s imports %s: front doors call lore/app only", file, p)
				}
			}
		}
	}
}
