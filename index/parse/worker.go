package parse

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"lore/childenv"
)

// The worker protocol: one JSON request per document on the worker's stdin,
// one JSON response on its stdout, in order. A worker serves documents until
// its stdin closes.

type request struct {
	Path        string `json:"path"`
	Kind        string `json:"kind"`
	MaxBytes    int64  `json:"max_bytes"`
	MemoryLimit int64  `json:"memory_limit"`
}

type response struct {
	Ready bool   `json:"ready,omitempty"` // the hello a worker sends first
	Doc   *Doc   `json:"doc,omitempty"`
	Err   string `json:"err,omitempty"`
	Code  string `json:"code,omitempty"` // names the Err* value the error wraps
}

var codes = map[string]error{
	"unsupported": ErrUnsupported, "corrupt": ErrCorrupt, "encrypted": ErrEncrypted,
	"too_large": ErrTooLarge, "encoding": ErrEncoding, "no_text": ErrNoText,
}

// WorkerArg is the argument that makes a Lore binary a parse worker: the
// default WorkerCmd is this executable with it.
const WorkerArg = "parse-worker"

// MaybeServeWorker serves as the parse worker and exits the process when
// args (os.Args) name that role; otherwise it returns at once. Every Lore
// binary calls it first thing in main.
func MaybeServeWorker(args []string) {
	if len(args) < 2 || args[1] != WorkerArg {
		return
	}
	if err := ServeWorker(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "parse-worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// ServeWorker is the body of the parse worker process: the program named by
// Options.WorkerCmd calls it with its stdin and stdout and exits when it
// returns. It returns nil when r reaches EOF.
func ServeWorker(r io.Reader, w io.Writer) error {
	dec := json.NewDecoder(bufio.NewReader(r))
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	if err := enc.Encode(response{Ready: true}); err != nil {
		return fmt.Errorf("parse worker: %w", err)
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("parse worker: %w", err)
	}
	memSet := false
	for {
		var req request
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("parse worker: read request: %w", err)
		}
		if req.MemoryLimit > 0 && !memSet {
			// Collect garbage hard well before the parent's hard limit kills us.
			debug.SetMemoryLimit(req.MemoryLimit / 4 * 3)
			memSet = true
		}
		var resp response
		doc, err := parseIsolated(req.Kind, req.Path, req.MaxBytes)
		if err != nil {
			resp.Err = err.Error()
			for c, e := range codes {
				if errors.Is(err, e) {
					resp.Code = c
				}
			}
		} else {
			resp.Doc = doc
		}
		if err := enc.Encode(resp); err != nil {
			return fmt.Errorf("parse worker: write response: %w", err)
		}
		if err := out.Flush(); err != nil {
			return fmt.Errorf("parse worker: write response: %w", err)
		}
	}
}

// parseIsolated parses the formats that run in a worker. A panic becomes an
// ErrCorrupt for this document only.
func parseIsolated(kind, path string, maxBytes int64) (doc *Doc, err error) {
	defer func() {
		if r := recover(); r != nil {
			doc, err = nil, fmt.Errorf("%w: parser panic: %v", ErrCorrupt, r)
		}
	}()
	switch kind {
	case kindDOCX:
		return parseDOCX(path, maxBytes)
	case kindHTML:
		b, err := readCapped(path, maxBytes)
		if err != nil {
			return nil, err
		}
		return parseHTML(b, path)
	}
	return nil, fmt.Errorf("%w: worker cannot parse %q", ErrUnsupported, kind)
}

// inWorker parses one document in a worker process, starting one if none is
// idle. A worker that crashed, hung or broke the protocol is killed; the next
// document gets a fresh one.
func (p *Parser) inWorker(ctx context.Context, kind, path string) (*Doc, error) {
	w, err := p.getWorker(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := w.call(ctx, request{Path: path, Kind: kind, MaxBytes: p.opt.MaxBytes, MemoryLimit: p.opt.MemoryLimit})
	if err != nil {
		w.stop()
		if errors.Is(context.Cause(ctx), ErrTimeout) {
			return nil, fmt.Errorf("%w: %s parser ran over %v and was killed", ErrTimeout, kind, p.opt.Timeout)
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if isOOM(err.Error()) && p.opt.MemoryLimit > 0 {
			return nil, fmt.Errorf("%w (%w: out of its %d MiB memory limit)", ErrTooLarge, ErrCrashed, p.opt.MemoryLimit>>20)
		}
		return nil, fmt.Errorf("%w: %v", ErrCrashed, err)
	}
	p.putWorker(w)
	if resp.Err != "" {
		if e, ok := codes[resp.Code]; ok {
			return nil, workerError{e, resp.Err}
		}
		return nil, errors.New(resp.Err)
	}
	if resp.Doc == nil {
		return nil, fmt.Errorf("%w: worker returned no document", ErrCrashed)
	}
	return resp.Doc, nil
}

// isOOM tells from a dead worker's last words that it hit its memory
// limit: the Go runtime's message, or a sanitizer's or C allocator's
// (poppler's says "Out of memory"). Under an address-space limit a new
// thread's stack can be what no longer fits, so the runtime's thread
// creation failures count too.
func isOOM(msg string) bool {
	msg = strings.ToLower(msg)
	for _, m := range []string{"out of memory", "failed to allocate", "cannot allocate memory", "std::bad_alloc",
		"pthread_create failed", "failed to create new os thread"} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// workerError carries a worker's message and the Err* value it wrapped there.
type workerError struct {
	kind error
	msg  string
}

func (e workerError) Error() string { return e.msg }
func (e workerError) Unwrap() error { return e.kind }

func (p *Parser) getWorker(ctx context.Context) (*worker, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("parser is closed")
	}
	for n := len(p.idle); n > 0; n = len(p.idle) {
		w := p.idle[n-1]
		p.idle = p.idle[:n-1]
		select {
		case <-w.exited: // died while idle (killed from outside): not this document's fault
			w.stop()
			continue
		default:
		}
		p.mu.Unlock()
		return w, nil
	}
	p.mu.Unlock()
	return startWorker(ctx, p.opt.WorkerCmd, p.opt.MemoryLimit)
}

func (p *Parser) putWorker(w *worker) {
	p.mu.Lock()
	if !p.closed && len(p.idle) < p.opt.MaxIdle {
		p.idle = append(p.idle, w)
		w = nil
	}
	p.mu.Unlock()
	if w != nil {
		w.stop()
	}
}

type worker struct {
	cmd    *exec.Cmd
	in     *os.File
	out    *os.File
	enc    *json.Encoder
	dec    *json.Decoder
	stderr crashLog
	exited chan struct{}
}

func startWorker(ctx context.Context, argv []string, memLimit int64) (*worker, error) {
	// Plain pipes rather than StdoutPipe, whose reads race with Wait: the
	// process is waited for in the background while a call may be reading.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	w := &worker{cmd: exec.Command(argv[0], argv[1:]...), in: inW, out: outR, exited: make(chan struct{})}
	w.cmd.Stdin, w.cmd.Stdout, w.cmd.Stderr = inR, outW, &w.stderr
	w.cmd.Env = childenv.Environ()
	err = w.cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("%w: start parse worker: %v", ErrCrashed, err)
	}
	go func() {
		w.cmd.Wait()
		close(w.exited)
	}()
	w.enc, w.dec = json.NewEncoder(inW), json.NewDecoder(bufio.NewReader(outR))
	// The worker says hello once its runtime is up. Its address space then
	// (a Go binary reserves about 1 GiB up front, more with cgo) is the base
	// the limit adds to, and it is set before the first document is sent.
	hello := make(chan error, 1)
	go func() {
		var r response
		err := w.dec.Decode(&r)
		if err == nil && !r.Ready {
			err = errors.New("no hello")
		}
		hello <- err
	}()
	select {
	case err = <-hello:
	case <-time.After(workerStartTimeout):
		err = fmt.Errorf("no hello within %v", workerStartTimeout)
	case <-ctx.Done():
		w.stop()
		return nil, context.Cause(ctx)
	}
	if err == nil {
		err = limitMemory(w.cmd.Process.Pid, memLimit)
	}
	if err != nil {
		w.stop()
		return nil, fmt.Errorf("%w: start parse worker %s: %v (%s)", ErrCrashed, argv[0], err, w.stderr.summary())
	}
	return w, nil
}

const workerStartTimeout = 30 * time.Second

// call sends one request and waits for its answer, the worker's death or ctx.
func (w *worker) call(ctx context.Context, req request) (response, error) {
	w.stderr.reset()
	type result struct {
		resp response
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		var r result
		if r.err = w.enc.Encode(req); r.err == nil {
			r.err = w.dec.Decode(&r.resp)
		}
		ch <- r
	}()
	select {
	case <-ctx.Done():
		w.stop() // closes the pipes, which ends the goroutine
		<-ch
		return response{}, ctx.Err()
	case r := <-ch:
		if r.err == nil {
			return r.resp, nil
		}
		// Most likely the worker died: let it finish dying for its status.
		select {
		case <-w.exited:
			return response{}, fmt.Errorf("worker %v: %s", w.cmd.ProcessState, w.stderr.summary())
		case <-time.After(2 * time.Second):
			return response{}, fmt.Errorf("worker protocol: %v", r.err)
		}
	}
}

// stop ends the worker: closing stdin asks it to exit, the kill makes sure.
func (w *worker) stop() {
	w.in.Close()
	w.cmd.Process.Kill()
	<-w.exited
	w.out.Close()
}

// crashLog keeps the start and the end of what a worker wrote to stderr for
// the current document: a Go runtime fatal error comes first, followed by
// goroutine dumps that can run to megabytes.
type crashLog struct {
	mu   sync.Mutex
	head []byte
	tail tailBuffer
}

func (c *crashLog) Write(p []byte) (int, error) {
	c.mu.Lock()
	if n := 2048 - len(c.head); n > 0 {
		c.head = append(c.head, p[:min(n, len(p))]...)
	}
	c.mu.Unlock()
	return c.tail.Write(p)
}

func (c *crashLog) reset() {
	c.mu.Lock()
	c.head = c.head[:0]
	c.mu.Unlock()
	c.tail.mu.Lock()
	c.tail.b = c.tail.b[:0]
	c.tail.mu.Unlock()
}

// summary picks the line that says why the worker died.
func (c *crashLog) summary() string {
	c.mu.Lock()
	head := string(c.head)
	c.mu.Unlock()
	for _, l := range strings.Split(head, "\n") {
		if strings.HasPrefix(l, "fatal error:") || strings.HasPrefix(l, "panic:") ||
			isOOM(l) || strings.Contains(l, "stack overflow") {
			return strings.TrimSpace(l)
		}
	}
	return lastLine(c.tail.String())
}
