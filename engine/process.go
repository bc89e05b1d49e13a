package engine

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"

	"lore/childenv"
	"lore/engine/wire"
)

// process is one supervised runner child. Requests are serialised by the
// Model's queue; process only moves lines and notices death.
type process struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	replies chan wire.Reply
	dead    chan struct{} // closed once the child has exited
	exitErr error         // set before dead is closed
	logs    *tail
	nextID  uint64
	wmu     sync.Mutex
}

// ErrRunnerDied wraps every failure caused by the runner process exiting.
var ErrRunnerDied = errors.New("model runner stopped")

// startProcess starts the runner program; onLog, if set, sees each line it logs.
func startProcess(program string, onLog func(string)) (*process, error) {
	cmd := exec.Command(program)
	cmd.Env = childenv.Environ()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, stdin: stdin, replies: make(chan wire.Reply, 64),
		dead: make(chan struct{}), logs: newTail(40, onLog)}
	cmd.Stderr = p.logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start runner %s: %w", program, err)
	}
	go p.readLoop(stdout)
	return p, nil
}

func (p *process) readLoop(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for sc.Scan() {
		var r wire.Reply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			r = wire.Reply{Error: fmt.Sprintf("bad reply from runner: %v", err), Done: true}
		}
		p.replies <- r
	}
	err := p.cmd.Wait()
	if err == nil {
		err = errors.New("exited")
	}
	p.exitErr = fmt.Errorf("%w (%v); last log lines:\n%s", ErrRunnerDied, err, p.logs.String())
	close(p.dead)
}

func (p *process) alive() bool {
	select {
	case <-p.dead:
		return false
	default:
		return true
	}
}

func (p *process) send(r wire.Request) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if _, err := p.stdin.Write(append(b, '\n')); err != nil {
		return p.deathError(err)
	}
	return nil
}

// deathError waits briefly for the exit status so the error carries the
// runner's last words.
func (p *process) deathError(cause error) error {
	select {
	case <-p.dead:
		return p.exitErr
	case <-time.After(2 * time.Second):
		return fmt.Errorf("%w: %v", ErrRunnerDied, cause)
	}
}

// call sends req and passes each reply to fn until one is Done. If ctx ends
// first, the runner is asked to cancel and call keeps reading until it
// finishes; a runner that does not stop within grace is killed.
func (p *process) call(ctx context.Context, req wire.Request, fn func(wire.Reply) error) error {
	p.nextID++
	req.ID = p.nextID
	if err := p.send(req); err != nil {
		return err
	}
	var ctxErr, fnErr error
	// handle applies one reply and reports whether the call is over.
	handle := func(r wire.Reply) (bool, error) {
		if r.Error != "" {
			return true, firstErr(ctxErr, fnErr, errors.New(r.Error))
		}
		// After a cancel only the closing reply (with its stats) is delivered.
		if (fnErr == nil && ctxErr == nil) || (r.Done && r.Piece == "") {
			if err := fn(r); err != nil && fnErr == nil && ctxErr == nil {
				fnErr = err
				p.send(wire.Request{Op: "cancel", ID: req.ID})
			}
		}
		return r.Done, firstErr(ctxErr, fnErr)
	}
	done := ctx.Done()
	var killTimer <-chan time.Time
	for {
		select {
		case r := <-p.replies:
			if over, err := handle(r); over {
				return err
			}
		case <-p.dead:
			// readLoop queued every reply before closing dead.
			for {
				select {
				case r := <-p.replies:
					if over, err := handle(r); over {
						return err
					}
				default:
					return firstErr(ctxErr, p.exitErr)
				}
			}
		case <-done:
			ctxErr, done = ctx.Err(), nil
			p.send(wire.Request{Op: "cancel", ID: req.ID})
			killTimer = time.After(5 * time.Second)
		case <-killTimer:
			p.kill()
		}
	}
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func (p *process) kill() {
	if p.cmd.Process != nil {
		p.cmd.Process.Kill()
	}
}

// close ends the runner: closing stdin lets it exit cleanly and free the
// model; it is killed if it does not.
func (p *process) close() {
	p.stdin.Close()
	select {
	case <-p.dead:
	case <-time.After(3 * time.Second):
		p.kill()
		<-p.dead
	}
}

// tail keeps the last lines written to it.
type tail struct {
	mu     sync.Mutex
	lines  []string
	part   string
	max    int
	onLine func(string)
}

func newTail(n int, onLine func(string)) *tail { return &tail{max: n, onLine: onLine} }

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.part + string(b)
	parts := strings.Split(s, "\n")
	t.part = parts[len(parts)-1]
	for _, l := range parts[:len(parts)-1] {
		t.lines = append(t.lines, l)
		if t.onLine != nil {
			t.onLine(l)
		}
	}
	if len(t.lines) > t.max {
		t.lines = append([]string(nil), t.lines[len(t.lines)-t.max:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := t.lines
	if t.part != "" {
		lines = append(lines[:len(lines):len(lines)], t.part)
	}
	return strings.Join(lines, "\n")
}
