package parse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"

	"lore/childenv"
)

// pdf runs pdftotext as a separate program: poppler handles far more real
// PDFs than the Go readers tried, and a crash or runaway there cannot take
// the indexer down. -layout keeps columns and table rows together; pages
// end with a form feed.
//
// The document reaches pdftotext on its stdin, not by name, and only once
// its memory limit is in place: nothing in the file can make it allocate
// before the limit applies. (Given the path, pdftotext would start parsing
// at once, racing the prlimit call; and it reads exactly the file that was
// opened here, not whatever the path names by then.) Setting RLIMIT_AS
// before exec instead would need a wrapper: prlimit(1) or a shell's
// ulimit, which a system may lack, or a re-exec of WorkerCmd, which is not
// always set; and it could not measure the base the limit adds to.
func (p *Parser) pdf(ctx context.Context, path string, file io.Reader) (*Doc, error) {
	bin, err := exec.LookPath(p.opt.PDFToText)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoPDFTool, err)
	}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	cmd := exec.CommandContext(cctx, bin, "-layout", "-enc", "UTF-8", "-", "-")
	cmd.Env = childenv.Environ()
	cmd.WaitDelay = time.Second // a killed program's children may hold its output open
	in := &gatedReader{r: file, open: make(chan struct{})}
	out := &capBuffer{max: p.opt.MaxBytes, full: stop}
	var stderr tailBuffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, out, &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("run %s: %w", bin, err)
	}
	if err := limitMemory(cmd.Process.Pid, p.opt.MemoryLimit); err != nil {
		in.fail()
		cmd.Process.Kill()
		cmd.Wait()
		return nil, err
	}
	close(in.open)
	err = cmd.Wait()
	if cause := context.Cause(ctx); cause != nil {
		if errors.Is(cause, ErrTimeout) {
			return nil, fmt.Errorf("%w: pdftotext ran over %v", ErrTimeout, p.opt.Timeout)
		}
		return nil, cause
	}
	if out.over {
		return nil, fmt.Errorf("%w: pdftotext output over %d bytes", ErrTooLarge, p.opt.MaxBytes)
	}
	msg := strings.TrimSpace(stderr.String())
	if err != nil {
		var ee *exec.ExitError
		switch {
		case strings.Contains(msg, "Incorrect password"), errors.As(err, &ee) && ee.ExitCode() == 3:
			return nil, fmt.Errorf("%w: needs a password (%s)", ErrEncrypted, lastLine(msg))
		case isOOM(msg) && p.opt.MemoryLimit > 0: // poppler aborts when an allocation fails
			return nil, fmt.Errorf("%w (%w: pdftotext ran out of its %d MiB memory limit)", ErrTooLarge, ErrCrashed, p.opt.MemoryLimit>>20)
		case errors.As(err, &ee) && ee.ExitCode() > 0:
			return nil, fmt.Errorf("%w: pdftotext: %s", ErrCorrupt, lastLine(msg))
		default: // killed by a signal: a crash
			return nil, fmt.Errorf("%w: pdftotext: %v %s", ErrCrashed, err, lastLine(msg))
		}
	}
	text, _, err := decodeText(out.buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%w: pdftotext output: %v", ErrCorrupt, err)
	}
	doc := &Doc{Parser: kindPDF, Title: baseTitle(path)}
	for i, page := range strings.Split(text, "\f") {
		ls := lines(page)
		if s, ok := section(ls, 0, len(ls), ""); ok {
			s.Page = i + 1
			doc.Sections = append(doc.Sections, s)
		}
	}
	if len(doc.Sections) == 0 {
		return nil, fmt.Errorf("%w: no text layer (a scanned PDF needs OCR)", ErrNoText)
	}
	return doc, nil
}

// gatedReader holds back every read until open is closed, and then reads
// from r unless fail was called first.
type gatedReader struct {
	r      io.Reader
	open   chan struct{}
	failed bool // set before open is closed
}

func (g *gatedReader) Read(p []byte) (int, error) {
	<-g.open
	if g.failed {
		return 0, io.EOF
	}
	return g.r.Read(p)
}

func (g *gatedReader) fail() {
	g.failed = true
	close(g.open)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" {
		return "no message"
	}
	return s
}

// capBuffer keeps up to max bytes (max < 0: all); past that it notes the
// overflow and calls full, which stops the writing program. (It does not
// embed bytes.Buffer: io.Copy would use the promoted ReadFrom and skip the cap.)
type capBuffer struct {
	buf  bytes.Buffer
	max  int64
	over bool
	full func()
}

func (b *capBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if b.max >= 0 && int64(b.buf.Len()+n) > b.max {
		if !b.over {
			b.over = true
			b.full()
		}
		p = p[:max(0, int(b.max)-b.buf.Len())]
	}
	b.buf.Write(p)
	return n, nil
}

// tailBuffer keeps the last 4 KiB written: enough for an error message.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = append(t.b[:0], t.b[len(t.b)-4096:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
