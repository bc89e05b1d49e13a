package main

import (
	"go/ast"
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
		// Small helpers shared across the layers (the engine's runner and
		// the CLI keep stdout for their protocols with internal/stdio):
		// they reach nothing of Lore's, so any layer may use them.
		{"lore/internal", []string{"lore/"}},
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
	// but the tools beside it (model files, grading, internal/stdio for
	// `lore mcp`'s stdout); benchmarks and
	// test-model tools (bench*.go, synth.go) may.
	front := map[string]bool{"lore/app": true, "lore/app/server": true, "lore/app/mcp": true, "lore/app/telemetry": true, "lore/frontend": true,
		"lore/bench": true, "lore/weights": true, "lore/eval": true, "lore/internal/stdio": true}
	// The MCP server is a front door too: it calls lore/app alone.
	for _, dir := range []string{".", "cmd/lore", "app/mcp"} {
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

// TestAppRooms holds app/'s rooms to their doors: the read-ahead's and the
// prefill meter's state is touched only through their methods (each has
// its own lock); only a question asked is an ask (drafts use the stages);
// and the prompt's text markers are used only where the prompt is laid
// out, so nothing finds a passage or the question by searching a rendered
// prompt.
func TestAppRooms(t *testing.T) {
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	paths, _ := filepath.Glob("app/*.go")
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = f
	}
	// methods of type recv declared in file
	methods := func(file, recv string) map[string]bool {
		out := map[string]bool{}
		for _, d := range files[file].Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil {
				if st, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok && st.X.(*ast.Ident).Name == recv {
					out[fd.Name.Name] = true
				}
			}
		}
		if len(out) == 0 {
			t.Fatalf("no methods of %s in app/%s: the rooms moved?", recv, file)
		}
		return out
	}
	rooms := []struct {
		field, file, recv string // App's field, the file that owns its type, the type
	}{
		{"ahead", "readahead.go", "readAhead"},
		{"prefill", "prefillcost.go", "prefillMeter"},
	}
	markers := map[string]bool{"questionMark": true, "sourcesHeading": true, "sourceNumber": true}
	for name, f := range files {
		for _, r := range rooms {
			if name == r.file {
				continue
			}
			ok := methods(r.file, r.recv)
			ast.Inspect(f, func(n ast.Node) bool {
				if sel, is := n.(*ast.SelectorExpr); is {
					if inner, is := sel.X.(*ast.SelectorExpr); is && inner.Sel.Name == r.field && !ok[sel.Sel.Name] {
						t.Errorf("%s: app/%s reaches into the %s's state (.%s.%s): use its methods", fset.Position(sel.Pos()), name, r.recv, r.field, sel.Sel.Name)
					}
				}
				return true
			})
		}
		// Drafts and measurements run the stages they need (find, layOut)
		// with a question and a quiet observer: only a question asked is
		// an ask.
		if name != "ask.go" {
			isAsk := func(e ast.Expr) bool { id, is := e.(*ast.Ident); return is && id.Name == "ask" }
			ast.Inspect(f, func(n ast.Node) bool {
				var made ast.Node
				switch n := n.(type) {
				case *ast.CompositeLit: // ask{…}, &ask{…}
					if isAsk(n.Type) {
						made = n
					}
				case *ast.CallExpr: // new(ask)
					if fn, is := n.Fun.(*ast.Ident); is && fn.Name == "new" && len(n.Args) == 1 && isAsk(n.Args[0]) {
						made = n
					}
				case *ast.ValueSpec: // var x ask
					if isAsk(n.Type) {
						made = n
					}
				}
				if made != nil {
					t.Errorf("%s: app/%s makes an ask: use the stages (find, layOut) with a question", fset.Position(made.Pos()), name)
				}
				return true
			})
		}
		if name == "prompt.go" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if id, is := n.(*ast.Ident); is && markers[id.Name] {
				t.Errorf("%s: app/%s uses the prompt's marker %s: lay the prompt out in prompt.go and read its segments", fset.Position(id.Pos()), name, id.Name)
			}
			return true
		})
	}
}
