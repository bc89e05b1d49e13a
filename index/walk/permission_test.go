//go:build unix

package walk

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestWalkPermission walks a tree with a chmod 000 folder and an unreadable
// file. Root reads them anyway, so when the test runs as root the walk runs
// in a child process (this test binary) as user nobody, where the modes apply.
func TestWalkPermission(t *testing.T) {
	root := build(t, tree{"ok.txt": "ok", "locked/x.txt": "x", "after/y.txt": "y", "noread.txt": "n"})
	if err := os.Chmod(filepath.Join(root, "locked"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "noread.txt"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(root, "locked"), 0o755) })

	var res childResult
	if os.Geteuid() != 0 {
		code := 0
		res, code = childResult{}, 0
		out := captureStdout(t, func() { code = childWalk(root) })
		if code != 0 {
			t.Fatalf("walk failed: %s", out)
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatal(err)
		}
	} else {
		res = walkAsNobody(t, root)
	}
	if !slices.Equal(res.Files, []string{"after/y.txt", "ok.txt"}) {
		t.Errorf("files = %q, want [after/y.txt ok.txt]", res.Files)
	}
	if len(res.Errors) != 2 || !strings.Contains(res.Errors[0], "locked: open") || !strings.Contains(res.Errors[1], "noread.txt: open") ||
		!strings.Contains(res.Errors[0], "permission denied") || !strings.Contains(res.Errors[1], "permission denied") {
		t.Errorf("errors = %q, want permission denied on locked and noread.txt", res.Errors)
	}
}

func walkAsNobody(t *testing.T, root string) childResult {
	t.Helper()
	// nobody must reach the tree and the binary: open up the temp folders
	// (created 0700) and copy the binary where it can run it.
	tmp := filepath.Clean(os.TempDir())
	for d := root; strings.HasPrefix(d, tmp+string(filepath.Separator)); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root+"-bin", "walk.test")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(bin)) })
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "LORE_WALK_CHILD="+root)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child walk as nobody: %v", err)
	}
	var res childResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	return res
}

func captureStdout(t *testing.T, f func()) []byte {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() { b, _ := io.ReadAll(r); done <- b }()
	f()
	os.Stdout = old
	w.Close()
	return <-done
}
