package parse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// pdf runs pdftotext as a separate program: poppler handles far more real
// PDFs than the Go readers tried, and a crash or runaway there cannot take
// the indexer down. -layout keeps columns and table rows together; pages
// end with a form feed.
func (p *Parser) pdf(ctx context.Context, path string) (*Doc, error) {
	bin, err := exec.LookPath(p.opt.PDFToText)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoPDFTool, err)
	}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	cmd := exec.CommandContext(cctx, bin, "-layout", "-enc", "UTF-8", path, "-")
	cmd.WaitDelay = time.Second // a killed program's children may hold its output open
	out := &capBuffer{max: p.opt.MaxBytes, full: stop}
	var stderr tailBuffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("run %s: %w", bin, err)
	}
	if err := limitMemory(cmd.Process.Pid, p.opt.MemoryLimit); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, err
	}
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
		case errors.As(err, &ee) && ee.ExitCode() > 0:
			return nil, fmt.Errorf("%w: pdftotext: %s", ErrCorrupt, lastLine(msg))
		default: // killed by a signal: memory limit or crash
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
