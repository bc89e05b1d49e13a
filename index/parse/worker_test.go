package parse

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func idlePids(p *Parser) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var pids []int
	for _, w := range p.idle {
		pids = append(pids, w.cmd.Process.Pid)
	}
	return pids
}

func TestWorkerReuse(t *testing.T) {
	dir := t.TempDir()
	p := newParser(t, Options{})
	var pid int
	for i := 0; i < 3; i++ {
		path := write(t, dir, fmt.Sprintf("d%d.docx", i), docxFile(t, []para{{"", fmt.Sprintf("document %d", i)}}, ""))
		doc, err := p.Parse(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		if got := doc.Sections[0].Text; got != fmt.Sprintf("document %d", i) {
			t.Errorf("doc %d text %q", i, got)
		}
		pids := idlePids(p)
		if len(pids) != 1 || (i > 0 && pids[0] != pid) {
			t.Fatalf("after doc %d idle workers %v, want the same one as before (%d)", i, pids, pid)
		}
		pid = pids[0]
	}
	p.Close()
	if alive(pid) {
		t.Errorf("worker %d still running after Close", pid)
	}
}

// TestWorkerMemoryLimit turns the byte caps off so that a zip bomb really
// fills the worker's memory: the worker must die at its limit, the caller
// get a clear error, and the next document a fresh worker.
func TestWorkerMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	bomb := filepath.Join(dir, "bomb.docx")
	bombDOCX(t, bomb, 1<<30/258) // 1 GiB of text in one run
	p := newParser(t, Options{MaxBytes: -1, MemoryLimit: 128 << 20, Timeout: 2 * time.Minute})
	start := time.Now()
	_, err := p.Parse(context.Background(), bomb)
	t.Logf("bomb: %v after %v", err, time.Since(start))
	switch {
	case raceBuild && errors.Is(err, ErrCrashed):
		t.Log("race build: the worker died at its limit with a sanitizer message")
	case !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrCrashed) || !strings.Contains(err.Error(), "128 MiB"):
		t.Fatalf("Parse = %v, want ErrTooLarge and ErrCrashed naming the limit", err)
	}
	if n := len(idlePids(p)); n != 0 {
		t.Errorf("%d idle workers after a crash, want 0", n)
	}
	ok := write(t, dir, "ok.docx", docxFile(t, []para{{"", "still works"}}, ""))
	if doc, err := p.Parse(context.Background(), ok); err != nil || doc.Sections[0].Text != "still works" {
		t.Errorf("next document: %v, %v", doc, err)
	}
}

func TestWorkerFailures(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "a.docx", docxFile(t, []para{{"", "text"}}, ""))
	tests := []struct {
		name string
		cmd  []string
		want error
		msg  string
	}{
		{"hangs", workerCmd(t, "hang-worker"), ErrTimeout, "killed"},
		{"crashes", workerCmd(t, "crash-worker"), ErrCrashed, "panic: simulated crash"},
		{"missing program", []string{filepath.Join(dir, "no-such-binary")}, ErrCrashed, "no-such-binary"},
		{"not a worker", []string{"/bin/echo", "hello"}, ErrCrashed, "start parse worker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newParser(t, Options{WorkerCmd: tt.cmd, Timeout: time.Second})
			for i := 0; i < 2; i++ { // a second try gets a new worker and fails the same way
				start := time.Now()
				_, err := p.Parse(context.Background(), path)
				if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
					t.Fatalf("try %d: Parse = %v, want %v saying %q", i, err, tt.want, tt.msg)
				}
				// A second's timeout, for a worker that hangs for an hour: a minute
				// only catches a wait for the worker itself, not a slow machine.
				if d := time.Since(start); d > time.Minute {
					t.Errorf("try %d took %v", i, d)
				}
				if n := len(idlePids(p)); n != 0 {
					t.Errorf("%d idle workers after a failure, want 0", n)
				}
			}
		})
	}
}

func TestWorkerConcurrent(t *testing.T) {
	dir := t.TempDir()
	p := newParser(t, Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprintf("document number %d", i)
			path := write(t, dir, fmt.Sprintf("c%d.docx", i), docxFile(t, []para{{"", want}}, ""))
			if i%2 == 1 {
				path = write(t, dir, fmt.Sprintf("c%d.html", i), []byte("<html><body><p>"+want+"</p></body></html>"))
			}
			doc, err := p.Parse(context.Background(), path)
			if err == nil && doc.Sections[0].Text != want {
				err = fmt.Errorf("got %q, want %q", doc.Sections[0].Text, want)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := len(idlePids(p)); n > 2 {
		t.Errorf("%d idle workers kept, want at most MaxIdle (2)", n)
	}
}

func TestServeWorkerProtocol(t *testing.T) {
	dir := t.TempDir()
	good := write(t, dir, "g.html", []byte("<p>hello</p>"))
	in := strings.NewReader(fmt.Sprintf(`{"path":%q,"kind":"html","max_bytes":1000}
{"path":%q,"kind":"docx","max_bytes":1000}
{"path":%q,"kind":"exe"}
`, good, good, good))
	var out strings.Builder
	if err := ServeWorker(in, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{`{"ready":true}`, `"Text":"hello"`, `"code":"corrupt"`, `"code":"unsupported"`}
	if len(lines) != len(want) {
		t.Fatalf("responses %q", lines)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("response %d = %s, want %s", i, lines[i], w)
		}
	}
	if err := ServeWorker(strings.NewReader("not json"), &out); err == nil {
		t.Error("garbage request: no error")
	}
}

// TestIsOOM: the last words of a worker that ran out of its memory limit,
// as the Go runtime, cgo, a sanitizer or a C allocator say them, and ones
// that are not.
func TestIsOOM(t *testing.T) {
	for _, tt := range []struct {
		msg  string
		want bool
	}{
		{"fatal error: runtime: out of memory", true},
		{"runtime: mmap: cannot allocate memory", true},
		{"Syntax Error: Out of memory", true},
		{"terminate called after throwing an instance of 'std::bad_alloc'", true},
		{"runtime/cgo: pthread_create failed: Resource temporarily unavailable", true},
		{"runtime: failed to create new OS thread (have 7 already; errno=12)", true},
		{"panic: runtime error: index out of range [3] with length 3", false},
		{"fatal error: concurrent map writes", false},
	} {
		if got := isOOM(tt.msg); got != tt.want {
			t.Errorf("isOOM(%q) = %v, want %v", tt.msg, got, tt.want)
		}
	}
}
