//go:build unix

package parse

import (
	"context"
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestParseFIFO puts a FIFO where a file is expected: opening it the usual
// way waits for a writer forever; Parse must refuse it at once.
func TestParseFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.md")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	p := newParser(t, Options{})
	done := make(chan error, 1)
	go func() {
		_, err := p.Parse(context.Background(), path)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnsupported) {
			t.Errorf("Parse = %v, want ErrUnsupported", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Parse blocked opening a FIFO")
	}
	f, _, err := OpenRegular(path)
	if !errors.Is(err, ErrUnsupported) || f != nil {
		t.Errorf("OpenRegular = %v, %v; want ErrUnsupported", f, err)
	}
}
