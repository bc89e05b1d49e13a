//go:build unix

package app_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"lore/app"
)

// TestSourcePathFIFO: a document replaced by a FIFO is refused at once,
// not waited on until a writer comes.
func TestSourcePathFIFO(t *testing.T) {
	a, lib, _ := twoWorkspaces(t)
	ctx := context.Background()
	river := firstChunk(t, a, "default", "river market")
	path := filepath.Join(lib, "river.md")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 2)
	go func() {
		f, _, err := a.OpenDocument(ctx, path)
		if f != nil {
			f.Close()
		}
		done <- err
	}()
	go func() {
		_, err := a.SourcePath(ctx, river.ChunkID)
		done <- err
	}()
	for range 2 {
		select {
		case err := <-done:
			if !errors.Is(err, app.ErrInvalid) {
				t.Errorf("a FIFO in a document's place: %v, want ErrInvalid (not a regular file)", err)
			}
		case <-time.After(10 * time.Second):
			// Unblock the open (a writer), so the test ends.
			if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
			t.Fatal("opening a FIFO in a document's place blocked")
		}
	}
}
