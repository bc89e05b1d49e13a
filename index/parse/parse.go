// Package parse turns a file into plain text sections with their location:
// heading path, page and line range.
//
// Plain text, Markdown and source code are read in-process: they are decoded
// and split by lines, which cannot blow up. PDF is read by poppler's
// pdftotext as a child program. DOCX (zip + XML) and HTML (a DOM parser plus
// readability, both deeply recursive) run in a supervised worker process,
// when Options.WorkerCmd is set, under a time limit and an address-space
// limit, because zip bombs, runaway allocation and stack exhaustion are
// failures recover() cannot catch. Every reader also caps the bytes it
// decompresses or keeps, so a hostile file fails with ErrTooLarge long
// before it reaches the memory limit.
package parse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Defaults for zero Options fields.
const (
	DefaultTimeout     = 60 * time.Second
	DefaultMemoryLimit = 2 << 30   // address space a worker or pdftotext may add before it is given a document
	DefaultMaxBytes    = 128 << 20 // bytes read, decompressed or extracted per document
)

// Errors returned (wrapped, with the path) by Parse; test with errors.Is.
var (
	ErrUnsupported = errors.New("unsupported format")
	ErrCorrupt     = errors.New("corrupt or unreadable document")
	ErrEncrypted   = errors.New("encrypted document")
	ErrTooLarge    = errors.New("document too large")
	ErrEncoding    = errors.New("unknown text encoding")
	ErrNoText      = errors.New("no extractable text")
	ErrTimeout     = errors.New("parsing timed out")
	ErrCrashed     = errors.New("parser process died")
	ErrNoPDFTool   = errors.New("pdftotext not found (install poppler-utils)")
)

// Section is a run of text under one heading, on one page.
type Section struct {
	Text    string
	Heading string // heading path joined with " > "; "" before the first heading
	Page    int    // 1-based; 0 for formats without pages
	// LineStart and LineEnd are the 1-based inclusive lines of the source file
	// (of the page, for PDF) that Text spans, line for line; 0 when the format
	// has no meaningful lines (DOCX, HTML).
	LineStart, LineEnd int
}

// Doc is a parsed document.
type Doc struct {
	Parser   string // "text", "markdown", "code", "html", "pdf", "docx"
	Title    string
	Sections []Section
	Lang     string // programming language, for Parser "code"
	Encoding string // source encoding when it was not UTF-8 ("windows-1252", "utf-16le", ...)
}

// Options configures a Parser.
type Options struct {
	// WorkerCmd starts a parse worker: a program that calls ServeWorker on
	// its stdin and stdout, e.g. {os.Executable(), "parse-worker"}. If nil,
	// DOCX and HTML are parsed in-process, protected only by the byte caps.
	WorkerCmd []string
	// Timeout bounds each document: 0 means DefaultTimeout.
	Timeout time.Duration
	// MemoryLimit is the address space, in bytes, that each worker and
	// pdftotext process may map beyond what it had at start-up (enforced on
	// Linux with RLIMIT_AS, set before the process is given a document):
	// 0 means DefaultMemoryLimit, <0 none.
	MemoryLimit int64
	// MaxBytes caps what one document may read, decompress or extract:
	// 0 means DefaultMaxBytes, <0 none.
	MaxBytes int64
	// PDFToText is the pdftotext program: "" means "pdftotext" from PATH.
	PDFToText string
	// MaxIdle is how many idle workers are kept for reuse: 0 means 2.
	MaxIdle int
}

// Parser parses documents. It is safe for concurrent use; each concurrent
// Parse of a worker format uses its own worker process.
type Parser struct {
	opt Options

	mu     sync.Mutex
	idle   []*worker
	closed bool
}

// New returns a Parser. Close it to stop its idle workers.
func New(opt Options) *Parser {
	if opt.Timeout == 0 {
		opt.Timeout = DefaultTimeout
	}
	if opt.MemoryLimit == 0 {
		opt.MemoryLimit = DefaultMemoryLimit
	}
	if opt.MaxBytes == 0 {
		opt.MaxBytes = DefaultMaxBytes
	}
	if opt.PDFToText == "" {
		opt.PDFToText = "pdftotext"
	}
	if opt.MaxIdle == 0 {
		opt.MaxIdle = 2
	}
	return &Parser{opt: opt}
}

// Close stops the idle workers. Parse may not be called after Close.
func (p *Parser) Close() error {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, w := range idle {
		w.stop()
	}
	return nil
}

// Parse reads one file. Errors wrap one of the Err* values.
func (p *Parser) Parse(ctx context.Context, path string) (*Doc, error) {
	doc, err := p.parse(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return doc, nil
}

// OpenRegular opens path for reading if it is a regular file, and fails
// with ErrUnsupported if it is not. A FIFO or device put where a file was is
// refused at once: opening it the usual way would wait for a writer.
func OpenRegular(path string) (*os.File, fs.FileInfo, error) {
	f, err := openNoBlock(path)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%w: not a regular file (%v)", ErrUnsupported, fi.Mode().Type())
	}
	return f, fi, nil
}

func (p *Parser) parse(ctx context.Context, path string) (*Doc, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, p.opt.Timeout, ErrTimeout)
	defer cancel()
	f, fi, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	head := make([]byte, 8<<10)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, err
	}
	head = head[:n]
	k := kindOf(path, head)
	switch k {
	case kindPDF:
		if p.opt.MaxBytes >= 0 && fi.Size() > p.opt.MaxBytes {
			return nil, fmt.Errorf("%w: file over %d bytes", ErrTooLarge, p.opt.MaxBytes)
		}
		return p.pdf(ctx, path, io.NewSectionReader(f, 0, fi.Size()))
	case kindDOCX, kindHTML:
		if len(p.opt.WorkerCmd) == 0 {
			return parseIsolated(k, path, p.opt.MaxBytes)
		}
		return p.inWorker(ctx, k, path)
	}
	tooLarge := fmt.Errorf("%w: file over %d bytes", ErrTooLarge, p.opt.MaxBytes)
	if p.opt.MaxBytes >= 0 && int64(n) > p.opt.MaxBytes {
		return nil, tooLarge
	}
	b := head
	if n == len(head) { // more to read
		left := int64(-1)
		if p.opt.MaxBytes >= 0 {
			left = p.opt.MaxBytes - int64(n)
		}
		rest, err := readAllCapped(f, left, "file")
		if errors.Is(err, ErrTooLarge) {
			return nil, tooLarge
		}
		if err != nil {
			return nil, err
		}
		b = append(head, rest...)
	}
	if err := ctx.Err(); err != nil {
		return nil, p.stopped(ctx)
	}
	text, enc, err := decodeText(b)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, p.stopped(ctx)
	}
	var doc *Doc
	switch k {
	case kindMarkdown:
		doc, err = parseMarkdown(ctx, text, path)
	case kindCode:
		doc = parseCode(text, path)
	default:
		doc = parseText(text, path)
	}
	if err != nil {
		return nil, p.stopped(ctx)
	}
	doc.Encoding = enc
	return doc, nil
}

// stopped says why ctx ended a parse done in this process.
func (p *Parser) stopped(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), ErrTimeout) {
		return fmt.Errorf("%w: ran over %v", ErrTimeout, p.opt.Timeout)
	}
	return context.Cause(ctx)
}

// Kinds of document, as named in Doc.Parser.
const (
	kindText     = "text"
	kindMarkdown = "markdown"
	kindCode     = "code"
	kindHTML     = "html"
	kindPDF      = "pdf"
	kindDOCX     = "docx"
)

// kindOf picks a parser by content for binary formats, then by extension.
func kindOf(path string, head []byte) string {
	if bytes.HasPrefix(head, []byte("%PDF-")) {
		return kindPDF
	}
	if bytes.HasPrefix(head, []byte("PK\x03\x04")) {
		return kindDOCX // other zips fail there with a clear error
	}
	ext := strings.ToLower(filepath.Ext(path))
	switch ext {
	case ".md", ".markdown", ".mdown", ".mkd", ".mdx":
		return kindMarkdown
	case ".html", ".htm", ".xhtml":
		return kindHTML
	case ".pdf":
		return kindPDF
	case ".docx":
		return kindDOCX
	case ".txt", ".text", "":
		if langOf(path) != "" {
			return kindCode
		}
		if ext == "" && looksHTML(head) {
			return kindHTML
		}
		return kindText
	}
	if langOf(path) != "" {
		return kindCode
	}
	if looksHTML(head) {
		return kindHTML
	}
	return kindText
}

func looksHTML(head []byte) bool {
	h := bytes.ToLower(bytes.TrimSpace(head[:min(len(head), 512)]))
	return bytes.HasPrefix(h, []byte("<!doctype html")) || bytes.HasPrefix(h, []byte("<html"))
}

// readCapped reads a whole file, failing with ErrTooLarge past max bytes.
func readCapped(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAllCapped(f, max, "file")
}

func readAllCapped(r io.Reader, max int64, what string) ([]byte, error) {
	if max < 0 {
		return io.ReadAll(r)
	}
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: %s over %d bytes", ErrTooLarge, what, max)
	}
	return b, nil
}

// cappedReader fails with ErrTooLarge, instead of stopping quietly as
// io.LimitReader does, once more than n bytes were read.
type cappedReader struct {
	r    io.Reader
	n    int64 // bytes left; <0 means no cap
	what string
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.n < 0 {
		return c.r.Read(p)
	}
	if c.n == 0 {
		// One more byte tells a file of exactly the cap from a larger one.
		var one [1]byte
		if n, _ := c.r.Read(one[:]); n == 0 {
			return 0, io.EOF
		}
		return 0, fmt.Errorf("%w: %s decompresses to more than the limit", ErrTooLarge, c.what)
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	return n, err
}
