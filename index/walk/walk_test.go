package walk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMain lets the test binary act as a walking child: the permission test
// re-runs it as an unprivileged user, since chmod 000 does not stop root.
func TestMain(m *testing.M) {
	if dir := os.Getenv("LORE_WALK_CHILD"); dir != "" {
		os.Exit(childWalk(dir))
	}
	os.Exit(m.Run())
}

type childResult struct {
	Files  []string
	Errors []string
}

func childWalk(dir string) int {
	var res childResult
	err := Walk(context.Background(), dir, Options{}, func(f File) error {
		res.Files = append(res.Files, f.Rel)
		return nil
	}, func(path string, err error) {
		res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", path, err))
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

type tree map[string]string // rel path → content; "->target" makes a symlink, trailing "/" a folder

func build(t *testing.T, files tree) string {
	t.Helper()
	root := t.TempDir()
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(rel, "/"):
			err := os.MkdirAll(p, 0o755)
			if err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(content, "->"):
			if err := os.Symlink(content[2:], p); err != nil {
				t.Fatal(err)
			}
		default:
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

type result struct {
	files   []string
	errs    map[string]error // by rel path
	skipped map[string]string
}

func run(t *testing.T, root string, opt Options) result {
	t.Helper()
	res := result{errs: map[string]error{}, skipped: map[string]string{}}
	rel := func(p string) string {
		r, err := filepath.Rel(root, p)
		if err != nil {
			t.Fatal(err)
		}
		return filepath.ToSlash(r)
	}
	opt.Skipped = func(p, reason string) { res.skipped[rel(p)] = reason }
	err := Walk(context.Background(), root, opt, func(f File) error {
		if f.Rel != rel(f.Path) {
			t.Errorf("Rel %q does not match Path %q", f.Rel, f.Path)
		}
		res.files = append(res.files, f.Rel)
		return nil
	}, func(p string, err error) { res.errs[rel(p)] = err })
	if err != nil {
		t.Fatalf("Walk: %v", err)
	}
	return res
}

func TestWalkSelection(t *testing.T) {
	big := strings.Repeat("x", 2000)
	docx := "PK\x03\x04\x14\x00\x00\x00\x08\x00[Content_Types].xml\x00\x00" // zip header, NULs included
	tests := []struct {
		name    string
		files   tree
		opt     Options
		want    []string
		skipped map[string]string
	}{
		{
			name: "defaults",
			files: tree{
				"a.md": "# A", "sub/b.txt": "b", ".hidden.md": "h", ".git/config": "c",
				"node_modules/x/readme.md": "x", "build/out.txt": "o", "vendor/v.go": "package v",
				"src/__pycache__/m.txt": "p", "package-lock.json": "{}", "app.min.js": "x",
				"notes/build.md": "a file named build is kept",
			},
			want: []string{"a.md", "notes/build.md", "sub/b.txt"},
			skipped: map[string]string{
				".hidden.md": SkipHidden, ".git": SkipHidden, "node_modules": SkipExcluded,
				"build": SkipExcluded, "vendor": SkipExcluded, "src/__pycache__": SkipExcluded,
				"package-lock.json": SkipExcluded, "app.min.js": SkipExcluded,
			},
		},
		{
			name:  "no default excludes",
			files: tree{"build/out.txt": "o", ".h/x.txt": "x"},
			opt:   Options{NoDefaultExcludes: true},
			want:  []string{"build/out.txt"},
		},
		{
			name: "binary by content not name",
			files: tree{
				"nul.txt": "text\x00with a NUL", "image.md": "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
				"script": "#!/bin/sh\necho hi\n", "doc.pdf": "%PDF-1.4\n\x00\xff binary body",
				"report.docx": docx, "archive.zip": "PK\x03\x04\x14\x00\x00\x00\x08\x00data.bin\x00",
				"utf16.txt": "\xff\xfeh\x00i\x00", "latin1.txt": "caf\xe9 cr\xe8me",
			},
			want: []string{"doc.pdf", "latin1.txt", "report.docx", "script", "utf16.txt"},
			skipped: map[string]string{
				"nul.txt": SkipBinary, "image.md": SkipBinary, "archive.zip": SkipBinary,
			},
		},
		{
			name:    "size limit",
			files:   tree{"small.txt": "s", "big.txt": big},
			opt:     Options{MaxFileSize: 1000},
			want:    []string{"small.txt"},
			skipped: map[string]string{"big.txt": SkipTooLarge},
		},
		{
			name: "gitignore files and caller patterns",
			files: tree{
				".gitignore": "*.log\n/top-only.txt\nsecret/\n!keep.log\n# comment\n\n",
				"a.log":      "l", "keep.log": "k", "top-only.txt": "t",
				"sub/top-only.txt":   "kept: anchored pattern is root-only",
				"sub/b.log":          "l",
				"sub/.gitignore":     "docs/draft.md\n!important.log\n",
				"sub/important.log":  "re-included by the deeper file",
				"sub/docs/draft.md":  "d",
				"sub/docs/final.md":  "f",
				"docs/draft.md":      "not under sub: kept",
				"secret/s.txt":       "s",
				"private/p.txt":      "p",
				"journal/2024/x.tmp": "t",
				"journal/2024/x.md":  "m",
			},
			opt: Options{Excludes: []string{"private/", "*.tmp"}},
			want: []string{
				"docs/draft.md", "journal/2024/x.md", "keep.log", "sub/docs/final.md",
				"sub/important.log", "sub/top-only.txt",
			},
			skipped: map[string]string{
				"a.log": SkipExcluded, "top-only.txt": SkipExcluded, "secret": SkipExcluded,
				"sub/b.log": SkipExcluded, "sub/docs/draft.md": SkipExcluded, "private": SkipExcluded,
				"journal/2024/x.tmp": SkipExcluded, ".gitignore": SkipHidden,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, build(t, tt.files), tt.opt)
			if !slices.Equal(res.files, tt.want) {
				t.Errorf("files = %q, want %q", res.files, tt.want)
			}
			for p, reason := range tt.skipped {
				if res.skipped[p] != reason {
					t.Errorf("skipped[%s] = %q, want %q", p, res.skipped[p], reason)
				}
			}
			if len(res.errs) > 0 {
				t.Errorf("unexpected errors: %v", res.errs)
			}
		})
	}
}

func TestWalkSymlinks(t *testing.T) {
	root := build(t, tree{
		"notes/a.md":      "a",
		"notes/deep/b.md": "b",
		"notes/deep/up":   "->../..",      // loop to the root
		"notes/self":      "->.",          // loop to itself
		"z-alias":         "->notes",      // same folder twice
		"z-link.md":       "->notes/a.md", // same file twice
		"a-first.md":      "->z/real.md",  // sorts before its target
		"z/real.md":       "real",
		"dangling.md":     "->missing.md", // broken link
		"ring1":           "->ring2",      // a loop of links
		"ring2":           "->ring1",
		"shown.md":        "->.hidden/h.md", // a hidden file, linked on purpose
		".hidden/h.md":    "h",
	})
	if err := os.Symlink("notes", filepath.Join(root, "lib")); err != nil {
		t.Fatal(err)
	}
	res := run(t, root, Options{Excludes: []string{"lib/"}}) // a folder-only pattern matches a link to a folder
	if res.skipped["lib"] != SkipExcluded {
		t.Errorf("lib (link to a folder) not excluded: %v", res.skipped)
	}
	want := []string{"notes/a.md", "notes/deep/b.md", "z/real.md", "shown.md"}
	if !slices.Equal(res.files, want) {
		t.Errorf("files = %q, want %q", res.files, want)
	}
	for _, p := range []string{"notes/deep/up", "notes/self", "ring1", "ring2"} {
		if !errors.Is(res.errs[p], ErrLoop) {
			t.Errorf("error for %s = %v, want ErrLoop", p, res.errs[p])
		}
	}
	if res.skipped["dangling.md"] != SkipBroken {
		t.Errorf("dangling.md skipped as %q, want %q", res.skipped["dangling.md"], SkipBroken)
	}
	for _, p := range []string{"z-alias", "z-link.md", "a-first.md"} {
		if res.skipped[p] != SkipDuplicate {
			t.Errorf("%s, a second way to what was walked, skipped as %q, want %q", p, res.skipped[p], SkipDuplicate)
		}
	}
	if len(res.errs) != 4 {
		t.Errorf("errors = %v, want exactly the four loops", res.errs)
	}
}

// TestWalkConfined tries to reach files outside the walked folder through
// links: none may be passed on, each must be reported as skipped, and
// FollowOutside lets them through.
func TestWalkConfined(t *testing.T) {
	base := t.TempDir()
	secret := filepath.Join(base, "secret")
	if err := os.MkdirAll(filepath.Join(secret, "keys"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"secret.txt", "keys/id.txt"} {
		if err := os.WriteFile(filepath.Join(secret, f), []byte("the secret"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := filepath.Join(base, "notes")
	links := map[string]string{
		"lib/notes.txt":  "../../secret/secret.txt",           // relative, climbing out (the reported case)
		"abs.txt":        filepath.Join(secret, "secret.txt"), // absolute
		"keys":           "../secret/keys",                    // a folder outside
		"abs-keys":       filepath.Join(secret, "keys"),       // the same, absolute
		"up":             "..",                                // the folder holding the root
		"chain.txt":      "hop.txt",                           // a link inside, to a link inside, to outside
		"hop.txt":        "../secret/secret.txt",              //
		"sub/sneaky.txt": "../../notes/../secret/secret.txt",  // through the root's own name
		"etc":            "/etc",                              // system folders
		"passwd.txt":     "/etc/passwd",                       //
		"inside.txt":     "../notes/sub/plain.txt",            // leaves and comes back in: allowed
	}
	files := tree{"sub/plain.txt": "plain", "lib/own.txt": "own"}
	for rel, target := range links {
		files[rel] = "->" + target
	}
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(content, "->"); ok {
			err = os.Symlink(target, p)
		} else {
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// The root reached through a link of its own: confinement is to where it leads.
	rootLink := filepath.Join(base, "shortcut")
	if err := os.Symlink(root, rootLink); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{root, rootLink} {
		res := run(t, r, Options{})
		if want := []string{"lib/own.txt", "sub/plain.txt"}; !slices.Equal(res.files, want) {
			t.Errorf("%s: files = %q, want %q", r, res.files, want)
		}
		for rel, target := range links {
			if rel == "inside.txt" {
				if res.skipped[rel] != SkipDuplicate {
					t.Errorf("%s: inside.txt skipped as %q, want %q", r, res.skipped[rel], SkipDuplicate)
				}
				continue
			}
			if res.skipped[rel] != SkipOutside {
				t.Errorf("%s: %s -> %s skipped as %q, want %q", r, rel, target, res.skipped[rel], SkipOutside)
			}
		}
		if len(res.errs) > 0 {
			t.Errorf("%s: errors %v", r, res.errs)
		}
	}

	res := run(t, root, Options{FollowOutside: true, Excludes: []string{"etc", "passwd.txt", "up"}})
	// Links are followed in the order found; the first to reach a target wins.
	want := []string{"lib/own.txt", "sub/plain.txt", "abs-keys/id.txt", "abs.txt"}
	if !slices.Equal(res.files, want) {
		t.Errorf("FollowOutside: files = %q, want %q", res.files, want)
	}
	for _, rel := range []string{"keys", "chain.txt", "hop.txt", "lib/notes.txt", "sub/sneaky.txt"} {
		if res.skipped[rel] != SkipDuplicate {
			t.Errorf("FollowOutside: %s, a second way to a target, skipped as %q", rel, res.skipped[rel])
		}
	}

	// A folder replaced by a link after an earlier walk is confined too.
	if err := os.RemoveAll(filepath.Join(root, "sub")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(root, "sub")); err != nil {
		t.Fatal(err)
	}
	res = run(t, root, Options{})
	if !slices.Equal(res.files, []string{"lib/own.txt"}) || res.skipped["sub"] != SkipOutside {
		t.Errorf("after sub became a link outside: files %q, skipped[sub] %q", res.files, res.skipped["sub"])
	}
}

// TestWalkVanished deletes a file after its folder was listed but before the
// walk reached it: the walk reports it and goes on.
func TestWalkVanished(t *testing.T) {
	root := build(t, tree{"a.txt": "a", "b.txt": "b", "c.txt": "c"})
	var got []string
	var errs []string
	err := Walk(context.Background(), root, Options{}, func(f File) error {
		got = append(got, f.Rel)
		if f.Rel == "a.txt" {
			return os.Remove(filepath.Join(root, "b.txt"))
		}
		return nil
	}, func(p string, err error) {
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("error for %s = %v, want not-exist", p, err)
		}
		errs = append(errs, filepath.Base(p))
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"a.txt", "c.txt"}) || !slices.Equal(errs, []string{"b.txt"}) {
		t.Errorf("files %q errors %q, want [a.txt c.txt] and [b.txt]", got, errs)
	}
}

func TestWalkStops(t *testing.T) {
	root := build(t, tree{"a.txt": "a", "b.txt": "b", "c/d.txt": "d"})
	stop := errors.New("stop")
	n := 0
	err := Walk(context.Background(), root, Options{}, func(File) error { n++; return stop }, nil)
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("fn error: Walk = %v after %d files, want stop after 1", err, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n = 0
	err = Walk(ctx, root, Options{}, func(File) error { n++; cancel(); return nil }, nil)
	if !errors.Is(err, context.Canceled) || n != 1 {
		t.Errorf("cancel: Walk = %v after %d files, want Canceled after 1", err, n)
	}
	if err := Walk(context.Background(), filepath.Join(root, "missing"), Options{}, func(File) error { return nil }, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing root: Walk = %v, want not-exist", err)
	}
	var got []string
	if err := Walk(context.Background(), filepath.Join(root, "a.txt"), Options{}, func(f File) error { got = append(got, f.Rel); return nil }, nil); err != nil || !slices.Equal(got, []string{"a.txt"}) {
		t.Errorf("file root: %v %q, want [a.txt]", err, got)
	}
}
