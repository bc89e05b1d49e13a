package app_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lore/app"
)

// twoWorkspaces is an app without models with a folder indexed in
// "default" and the same folder, and one more, in "other".
func twoWorkspaces(t *testing.T) (a *app.App, lib, more string) {
	t.Helper()
	ctx := context.Background()
	root := t.TempDir()
	lib, more = filepath.Join(root, "lib"), filepath.Join(root, "more")
	writeFile(t, filepath.Join(lib, "river.md"), library["river.md"])
	writeFile(t, filepath.Join(more, "sub", "garden.txt"), library["garden.txt"])
	a, err := app.New(ctx, app.Config{DataDir: t.TempDir(), WorkerCmd: []string{os.Args[0], "parse-worker"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	for ws, folders := range map[string][]string{"default": {lib}, "other": {lib, more}} {
		if _, err := a.Index(ctx, ws, folders, nil); err != nil {
			t.Fatalf("index %s: %v", ws, err)
		}
	}
	return a, lib, more
}

// firstChunk is the best passage for query in a workspace.
func firstChunk(t *testing.T, a *app.App, ws, query string) app.Source {
	t.Helper()
	res, err := a.Search(context.Background(), ws, query, app.SearchOptions{TopK: 1})
	if err != nil || len(res.Passages) == 0 {
		t.Fatalf("search %s for %q: %+v %v", ws, query, res, err)
	}
	return res.Passages[0]
}

// TestChunkIn: a passage belongs to the workspace whose index holds it,
// as the database says: the same file indexed by another workspace is
// another passage there.
func TestChunkIn(t *testing.T) {
	a, _, _ := twoWorkspaces(t)
	ctx := context.Background()
	river := firstChunk(t, a, "default", "river market")
	garden := firstChunk(t, a, "other", "garden tomatoes")
	riverThere := firstChunk(t, a, "other", "river market")
	if riverThere.ChunkID == river.ChunkID || riverThere.Path != river.Path {
		t.Fatalf("the same file in two workspaces: chunks %d and %d, paths %s and %s", river.ChunkID, riverThere.ChunkID, river.Path, riverThere.Path)
	}
	if src, err := a.ChunkIn(ctx, "default", river.ChunkID); err != nil || !strings.Contains(src.Text, "river market") {
		t.Errorf("ChunkIn(default, %d) = %+v, %v", river.ChunkID, src, err)
	}
	if src, err := a.ChunkIn(ctx, "", river.ChunkID); err != nil || src.ChunkID != river.ChunkID {
		t.Errorf(`ChunkIn("", %d) = %+v, %v; want the default workspace's`, river.ChunkID, src, err)
	}
	for _, c := range []struct {
		ws string
		id int64
	}{
		{"default", garden.ChunkID},     // another workspace's folder
		{"default", riverThere.ChunkID}, // another workspace's index of the same file
		{"other", river.ChunkID},
		{"default", 1 << 40}, // no such chunk
		{"nosuch", river.ChunkID},
	} {
		if src, err := a.ChunkIn(ctx, c.ws, c.id); !errors.Is(err, app.ErrNotFound) {
			t.Errorf("ChunkIn(%s, %d) = %+v, %v; want ErrNotFound", c.ws, c.id, src, err)
		}
	}
}

// TestSourcePathOpenDocument: OpenDocument opens an indexed document by
// its path and names its workspace; any other path, or a document whose
// folder became a link out of the library, is refused.
func TestSourcePathOpenDocument(t *testing.T) {
	a, lib, more := twoWorkspaces(t)
	ctx := context.Background()
	garden := filepath.Join(more, "sub", "garden.txt")
	f, ws, err := a.OpenDocument(ctx, garden)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if ws != "other" || string(b) != library["garden.txt"] {
		t.Errorf("OpenDocument(%s): workspace %q, %q", garden, ws, b)
	}
	// An uncleaned path is the document it names.
	if f, _, err := a.OpenDocument(ctx, more+"/x/../sub/garden.txt"); err != nil {
		t.Errorf("OpenDocument with x/..: %v", err)
	} else {
		f.Close()
	}

	outside := filepath.Join(filepath.Dir(lib), "outside")
	writeFile(t, filepath.Join(outside, "secret.txt"), "the secret\n")
	writeFile(t, filepath.Join(outside, "garden.txt"), "the secret garden\n")
	for _, p := range []string{
		filepath.Join(outside, "secret.txt"),
		lib + "/../outside/secret.txt",
		lib, // the folder itself
		filepath.Join(lib, "nosuch.md"),
	} {
		if f, _, err := a.OpenDocument(ctx, p); !errors.Is(err, app.ErrNotFound) {
			if f != nil {
				f.Close()
			}
			t.Errorf("OpenDocument(%s): %v, want ErrNotFound", p, err)
		}
	}
	// A folder inside the workspace's becomes a link out of the library.
	// (The workspace's folder itself may be a link: folders are added
	// through links.)
	sub := filepath.Join(more, "sub")
	if err := os.RemoveAll(sub); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, sub); err != nil {
		t.Fatal(err)
	}
	if f, _, err := a.OpenDocument(ctx, garden); !errors.Is(err, app.ErrOutsideLibrary) {
		if f != nil {
			f.Close()
		}
		t.Errorf("OpenDocument(%s) through a folder now linked out: %v, want ErrOutsideLibrary", garden, err)
	}
	// Its file is gone.
	if err := os.Remove(sub); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.OpenDocument(ctx, garden); !errors.Is(err, app.ErrNotFound) {
		t.Errorf("OpenDocument(%s) after it was deleted: %v, want ErrNotFound", garden, err)
	}
}
