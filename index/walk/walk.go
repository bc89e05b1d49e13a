// Package walk finds the files under a folder that are worth indexing.
//
// It skips hidden entries, dependency and build folders, paths matched by
// .gitignore files found in the tree or by caller patterns, files over a size
// limit and files whose first bytes show they are binary (PDF and DOCX, which
// the parser reads, excepted).
//
// Symlinks are confined to the root: each one is resolved, and one whose
// target lies outside the resolved root is skipped (SkipOutside) unless
// Options.FollowOutside is set, so a link planted in an added folder cannot
// pull in ~/.ssh or /etc. Links are followed after the rest of the tree is
// walked, so a file or folder reached both directly and through a link is
// passed once, under its own path. Loops are detected by device and inode
// and reported, not followed.
package walk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// DefaultMaxFileSize is used when Options.MaxFileSize is 0.
const DefaultMaxFileSize = 50 << 20

// sniffLen is how much of a file is read to tell text from binary.
const sniffLen = 8 << 10

// Errors passed to onErr (wrapped with the path).
var (
	ErrLoop = errors.New("symlink loop")
)

// Reasons passed to Options.Skipped.
const (
	SkipHidden    = "hidden"
	SkipExcluded  = "excluded"
	SkipTooLarge  = "too large"
	SkipBinary    = "binary"
	SkipDuplicate = "already visited"
	SkipSpecial   = "not a regular file"
	SkipOutside   = "link to outside the folder"
	SkipBroken    = "link to nothing"
)

// Options configures Walk.
type Options struct {
	// MaxFileSize skips larger files: 0 means DefaultMaxFileSize, <0 no limit.
	MaxFileSize int64
	// Excludes are extra gitignore-style patterns, relative to the root.
	Excludes []string
	// NoDefaultExcludes turns off DefaultExcludes (hidden entries stay excluded).
	NoDefaultExcludes bool
	// Skipped, if set, is told about every path left out and why (Skip* reasons).
	Skipped func(path, reason string)
	// FollowOutside follows symlinks whose targets lie outside the root.
	// Off by default: only what the user added is indexed.
	FollowOutside bool
}

// File is a candidate for indexing.
type File struct {
	Path    string    // as reached: under root, through symlinks, not resolved
	Rel     string    // relative to root, slash-separated
	Size    int64     // of the target, for a symlink
	ModTime time.Time // of the target, for a symlink
}

// DefaultExcludes are gitignore-style patterns for dependency folders, build
// output and generated files that are text but not knowledge.
func DefaultExcludes() []string {
	return []string{
		"node_modules/", "bower_components/", "vendor/", "dist/", "build/", "target/",
		"bin/", "obj/", "out/", "__pycache__/", "venv/", "site-packages/",
		"*.min.js", "*.min.css", "*.map", "*.pyc",
		"package-lock.json", "yarn.lock", "pnpm-lock.yaml", "go.sum", "Cargo.lock",
		"poetry.lock", "composer.lock", "Gemfile.lock",
	}
}

// Walk calls fn for each candidate file under root, and onErr for per-path
// problems (permission, loops, vanished files); those never stop the walk.
// Files come in lexical order, those reached through symlinks after the
// rest. It returns only on ctx cancel, an error from fn, or a root-level
// failure. A root that is a file is checked and passed to fn alone; the root
// itself may be a symlink.
func Walk(ctx context.Context, root string, opt Options, fn func(File) error, onErr func(path string, err error)) error {
	if onErr == nil {
		onErr = func(string, error) {}
	}
	if opt.MaxFileSize == 0 {
		opt.MaxFileSize = DefaultMaxFileSize
	}
	fi, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("walk: %w", err)
	}
	w := &walker{ctx: ctx, opt: opt, fn: fn, onErr: onErr, seen: map[fileID]bool{}}
	if !fi.IsDir() {
		return w.file(root, filepath.Base(root), fi)
	}
	if w.real, err = realPath(root); err != nil {
		return fmt.Errorf("walk: %w", err)
	}
	var rules []rule
	if !opt.NoDefaultExcludes {
		rules = appendRules(rules, "", DefaultExcludes())
	}
	rules = appendRules(rules, "", opt.Excludes)
	id, err := idOf(root, fi)
	if err != nil {
		return fmt.Errorf("walk: %w", err)
	}
	if err := w.dir(root, "", w.real, rules, []fileID{id}); err != nil {
		return err
	}
	// Links last, so that what they lead to inside the root has been seen
	// under its own path; walking a linked folder may queue more links.
	for len(w.links) > 0 {
		l := w.links[0]
		w.links = w.links[1:]
		if err := w.link(l); err != nil {
			return err
		}
	}
	return nil
}

type walker struct {
	ctx   context.Context
	opt   Options
	fn    func(File) error
	onErr func(string, error)
	seen  map[fileID]bool // directories entered and files passed to fn
	real  string          // the root, symlinks resolved
	links []link          // symlinks found, to follow once the tree is walked
}

// link is a symlink (or another entry that resolves elsewhere, such as a
// Windows junction) found during the walk.
type link struct {
	path, rel string
	target    string // resolved
	parent    string // the folder holding the link, resolved
	rules     []rule
	ancestors []fileID // of the folder holding the link
}

// realPath resolves every symlink in path and makes it absolute.
func realPath(path string) (string, error) {
	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	return filepath.Abs(p)
}

// within reports whether path is root or lies under it; both are resolved.
func within(root, path string) bool {
	if path == root {
		return true
	}
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

func (w *walker) skip(path, reason string) {
	if w.opt.Skipped != nil {
		w.opt.Skipped(path, reason)
	}
}

// dir walks one directory; real is where it is, symlinks resolved.
// ancestors holds the ids of the directories on the current path, root
// first, so a symlink back to any of them is a loop.
func (w *walker) dir(path, rel, real string, rules []rule, ancestors []fileID) error {
	w.seen[ancestors[len(ancestors)-1]] = true
	entries, err := os.ReadDir(path)
	if err != nil {
		if rel == "" {
			return fmt.Errorf("walk: %w", err) // the root itself
		}
		w.onErr(path, err)
		return nil
	}
	if gi := filepath.Join(path, ".gitignore"); hasEntry(entries, ".gitignore") {
		lines, err := readLines(gi)
		if err != nil {
			w.onErr(gi, err)
		} else {
			rules = appendRules(rules, rel, lines)
		}
	}
	for _, e := range entries {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		name := e.Name()
		p := filepath.Join(path, name)
		r := name
		if rel != "" {
			r = rel + "/" + name
		}
		if strings.HasPrefix(name, ".") {
			w.skip(p, SkipHidden)
			continue
		}
		// Excluded entries are dropped before any stat; a symlink is
		// checked again once its target's kind is known.
		if ignored(rules, r, e.IsDir()) {
			w.skip(p, SkipExcluded)
			continue
		}
		if isLink(e.Type()) {
			w.queueLink(p, r, real, rules, ancestors)
			continue
		}
		if err := w.entry(p, r, filepath.Join(real, name), rules, ancestors, e.IsDir(), false); err != nil {
			return err
		}
	}
	return nil
}

// isLink tells a symlink, or what Windows reports for a junction, from a
// file or folder: it may lead anywhere.
func isLink(m fs.FileMode) bool { return m&fs.ModeSymlink != 0 || m&fs.ModeIrregular != 0 }

// queueLink resolves a link found in the folder real and keeps it for
// later.
func (w *walker) queueLink(p, r, real string, rules []rule, ancestors []fileID) {
	target, err := realPath(p)
	if errors.Is(err, fs.ErrNotExist) {
		// Not an error of a file to index: reported as skipped, so that what was stored
		// for the link while it led somewhere is not kept as if hidden by an error.
		w.skip(p, SkipBroken)
		return
	}
	if err != nil {
		w.onErr(p, linkError(err)) // a loop of links, permission
		return
	}
	w.links = append(w.links, link{path: p, rel: r, target: target, parent: real,
		rules: rules[:len(rules):len(rules)], ancestors: ancestors[:len(ancestors):len(ancestors)]})
}

// entry handles one file or folder under a folder being walked: real is
// where it is, resolved. isDir is what the listing said, for a second check
// of the rules once the kind of a link's target is known. follow is set for
// a link already checked; otherwise the entry is looked at without
// following links, so that one which became a link since the folder was
// listed is caught too.
func (w *walker) entry(p, r, real string, rules []rule, ancestors []fileID, isDir, follow bool) error {
	stat := os.Lstat
	if follow {
		stat = os.Stat
	}
	fi, err := stat(p)
	if err != nil {
		w.onErr(p, linkError(err)) // vanished, dangling symlink, permission on the target
		return nil
	}
	if !follow && isLink(fi.Mode()) {
		w.queueLink(p, r, filepath.Dir(real), rules, ancestors)
		return nil
	}
	if fi.IsDir() != isDir && ignored(rules, r, fi.IsDir()) {
		w.skip(p, SkipExcluded)
		return nil
	}
	if !fi.IsDir() {
		return w.file(p, r, fi)
	}
	id, err := idOf(p, fi)
	if err != nil {
		w.onErr(p, err)
		return nil
	}
	if contains(ancestors, id) {
		w.onErr(p, fmt.Errorf("%w: %s leads back to a parent folder", ErrLoop, p))
		return nil
	}
	if w.seen[id] {
		w.skip(p, SkipDuplicate)
		return nil
	}
	return w.dir(p, r, real, rules[:len(rules):len(rules)], append(ancestors[:len(ancestors):len(ancestors)], id))
}

// link follows a symlink found in the walk, unless it leads outside the
// root (and that is not allowed) or to what was already walked.
func (w *walker) link(l link) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if !w.opt.FollowOutside && !within(w.real, l.target) {
		w.skip(l.path, SkipOutside)
		return nil
	}
	// A link to a folder holding it is a loop, however the walk got there.
	if within(l.target, l.parent) {
		if fi, err := os.Stat(l.path); err == nil && fi.IsDir() {
			w.onErr(l.path, fmt.Errorf("%w: %s leads back to a parent folder", ErrLoop, l.path))
			return nil
		}
	}
	return w.entry(l.path, l.rel, l.target, l.rules, l.ancestors, false, true)
}

// linkError marks a chain of links that never ends as ErrLoop.
func linkError(err error) error {
	if errors.Is(err, syscall.ELOOP) || (err != nil && strings.Contains(err.Error(), "too many links")) {
		return fmt.Errorf("%w: %v", ErrLoop, err)
	}
	return err
}

// file checks one file and passes it to fn. Only fn's error is returned.
func (w *walker) file(path, rel string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		w.skip(path, SkipSpecial)
		return nil
	}
	if w.opt.MaxFileSize > 0 && fi.Size() > w.opt.MaxFileSize {
		w.skip(path, SkipTooLarge)
		return nil
	}
	if id, err := idOf(path, fi); err == nil {
		if w.seen[id] {
			w.skip(path, SkipDuplicate) // hard link or symlink to a file already passed
			return nil
		}
		w.seen[id] = true
	}
	head, err := readHead(path)
	if err != nil {
		w.onErr(path, err)
		return nil
	}
	if !Indexable(head, path) {
		w.skip(path, SkipBinary)
		return nil
	}
	return w.fn(File{Path: path, Rel: rel, Size: fi.Size(), ModTime: fi.ModTime()})
}

// Indexable tells from a file's first bytes whether it is text or a binary
// format the parser reads (PDF, DOCX). name breaks the tie for a zip: one
// named .docx is a Word document, whole or not (a damaged one is the
// parser's to report, not a binary to leave out), and one with word/
// entries in its first bytes is one whatever its name.
func Indexable(head []byte, name string) bool {
	if bytes.HasPrefix(head, []byte("%PDF-")) {
		return true
	}
	if bytes.HasPrefix(head, []byte("PK\x03\x04")) {
		return bytes.Contains(head, []byte("word/")) || strings.EqualFold(filepath.Ext(name), ".docx")
	}
	ct := http.DetectContentType(head)
	switch {
	case strings.HasPrefix(ct, "text/plain; charset=utf-16"):
		return true // UTF-16 with a BOM: NULs are expected
	case strings.HasPrefix(ct, "text/"):
		return bytes.IndexByte(head, 0) < 0
	}
	return false
}

func readHead(path string) ([]byte, error) {
	f, err := openNoBlock(path) // it was a file when stat'ed; a FIFO now must not block
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: no longer a regular file", path)
	}
	buf := make([]byte, sniffLen)
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, err
	}
	return buf[:n], nil
}

func readLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return strings.Split(string(b), "\n"), nil
}

func hasEntry(entries []os.DirEntry, name string) bool {
	for _, e := range entries {
		if e.Name() == name {
			return true
		}
	}
	return false
}

func contains(ids []fileID, id fileID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
