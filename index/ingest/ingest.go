// Package ingest runs incremental indexing: it walks a workspace's folders, compares what
// it finds with the store, parses and chunks new and changed files, applies deletions and
// renames, and embeds chunks that lack vectors.
//
// Every document is committed in its own transaction, and a document is marked indexed
// only in the transaction that stores its chunks, so a run killed at any moment leaves a
// consistent store; the next run re-scans and finishes the job.
//
// Every step is bounded: each loop checks the context, so a cancelled run returns within
// a fraction of a second, and each document has a time budget (Options.DocTimeout) for
// its reading, parsing and chunking in this process; one over it is recorded as an error
// and the run goes on.
package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"lore/index/chunk"
	"lore/index/parse"
	"lore/index/walk"
	"lore/store"
)

// Embedder turns passages into vectors. The app wraps its model with a scheduler that
// gives interactive queries priority; ingest calls it one batch at a time.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	ModelID() string
}

// Indexer indexes folders into a store. Runs on one Indexer are serialised.
type Indexer struct {
	DB       *store.DB
	Parser   *parse.Parser
	Embedder Embedder // nil: BM25 only

	mu sync.Mutex
}

// Options tune a run. Zero values are sensible.
type Options struct {
	Walk       walk.Options
	Chunk      chunk.Options
	Workers    int // files parsed at once; 0: GOMAXPROCS
	EmbedBatch int // passages per Embed call; 0: 32
	// Progress, if set, receives progress events: at most every 100 ms, plus every phase
	// change and every document error. It is called from the running goroutines and
	// must not block for long.
	Progress func(Progress)
	// Debounce is how long Watch waits for a burst of changes to end; 0: 500 ms.
	Debounce time.Duration
	// DocTimeout is the time one document may take in this process: hashing, parsing
	// and chunking (the Parser bounds its worker and pdftotext by its own Timeout too).
	// A document over it is recorded as an error. 0: DefaultDocTimeout.
	DocTimeout time.Duration
	// FollowOutside, if set, tells for each folder being walked (its absolute path, as
	// registered) whether symlinks in it may lead outside it. nil: never, unless
	// Walk.FollowOutside allows it for all.
	FollowOutside func(folder string) bool
}

// DefaultDocTimeout is Options.DocTimeout when zero. Reading, parsing and chunking run
// at 20 MB/s or more on one slow core, and files over 50 MB are not read at all.
const DefaultDocTimeout = 2 * time.Minute

// ErrOverBudget is the reason recorded for a document that ran over Options.DocTimeout.
var ErrOverBudget = errors.New("over its time budget")

// Phases of a run, in order.
const (
	PhaseScan  = "scan"
	PhaseParse = "parse"
	PhaseEmbed = "embed"
	PhaseDone  = "done"
)

// Progress reports where a run is. In the parse phase the file counts cover the files that
// need parsing; in the embed phase Chunks and ChunksTotal count passages to embed.
type Progress struct {
	Phase       string        `json:"phase"`
	FilesDone   int           `json:"files_done"`
	FilesTotal  int           `json:"files_total"`
	Chunks      int           `json:"chunks"`
	ChunksTotal int           `json:"chunks_total,omitempty"`
	FilesPerSec float64       `json:"files_per_sec"`
	ETA         time.Duration `json:"eta_ns"`
	Current     string        `json:"current,omitempty"`
	Err         *DocError     `json:"error,omitempty"`
}

// DocError is a file that could not be indexed and why.
type DocError struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Skip is a file deliberately left out and why: a walk.Skip* reason (binary, too large,
// not a regular file, a link to outside the folder or to nothing) or the parser's
// (unsupported, no text).
type Skip struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// MaxListedSkips is how many skipped files a Summary lists; Skipped counts them all.
const MaxListedSkips = 1000

// Summary is the outcome of a run.
type Summary struct {
	Files     int `json:"files"`     // candidate files found
	Indexed   int `json:"indexed"`   // parsed and stored
	Unchanged int `json:"unchanged"` // same size and mtime, or same content
	// Skipped counts files left out: binary, too large, not regular files, links to
	// outside the folder or to nothing, found now; unsupported or empty, decided now or
	// before.
	Skipped int `json:"skipped"`
	// SkippedFiles lists the first MaxListedSkips of those decided in this run (a file
	// found unsupported in an earlier run and unchanged since is only counted).
	SkippedFiles []Skip     `json:"skipped_files"`
	Deleted      int        `json:"deleted"`
	Renamed      int        `json:"renamed"`
	Chunks       int        `json:"chunks"`   // chunks written
	Embedded     int        `json:"embedded"` // chunks embedded
	Errors       []DocError `json:"errors"`
	Seconds      float64    `json:"seconds"`
}

// found is a file on disk during a run.
type found struct {
	walk.File
	folder int64
	hash   string // computed lazily
}

// job is a file that needs work in the parse phase.
type job struct {
	f    *found
	prev *store.Document // stored version, if any
}

// Run indexes folders (absolute or relative paths) into the named workspace, registering
// the folders as needed; no folders means all of the workspace's registered folders.
// Problems with single files are recorded in the store and the Summary and never stop the
// run; Run fails only on cancellation or when the store fails. It returns the Summary so
// far in either case.
func (ix *Indexer) Run(ctx context.Context, workspace string, folders []string, opt Options) (Summary, error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	r, err := ix.newRun(ctx, workspace, folders, opt)
	if err != nil {
		return Summary{}, err
	}
	err = r.run(ctx)
	r.sum.Seconds = time.Since(r.start).Seconds()
	r.emit(Progress{Phase: PhaseDone, FilesDone: r.sum.Files, FilesTotal: r.sum.Files, Chunks: r.sum.Chunks}, true)
	return r.sum, err
}

type run struct {
	ix      *Indexer
	opt     Options
	ws      store.Workspace
	folders []store.Folder // being indexed, deepest first
	start   time.Time

	mu  sync.Mutex // guards sum
	sum Summary

	emitMu   sync.Mutex // guards lastEmit and last, held while the callback runs
	lastEmit time.Time
	last     Progress
}

func (ix *Indexer) newRun(ctx context.Context, workspace string, paths []string, opt Options) (*run, error) {
	if ix.DB == nil || ix.Parser == nil {
		return nil, errors.New("ingest: Indexer needs a DB and a Parser")
	}
	if opt.Workers <= 0 {
		opt.Workers = runtime.GOMAXPROCS(0)
	}
	if opt.EmbedBatch <= 0 {
		opt.EmbedBatch = 32
	}
	if opt.DocTimeout <= 0 {
		opt.DocTimeout = DefaultDocTimeout
	}
	r := &run{ix: ix, opt: opt, start: time.Now(), sum: Summary{Errors: []DocError{}, SkippedFiles: []Skip{}}}
	ws, err := ix.DB.EnsureWorkspace(ctx, workspace)
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	r.ws = ws
	if len(paths) == 0 {
		if r.folders, err = ix.DB.Folders(ctx, ws.ID); err != nil {
			return nil, fmt.Errorf("ingest: %w", err)
		}
	}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("ingest: folder %q: %w", p, err)
		}
		f, err := ix.DB.AddFolder(ctx, ws.ID, abs)
		if err != nil {
			return nil, fmt.Errorf("ingest: %w", err)
		}
		if !slices.ContainsFunc(r.folders, func(g store.Folder) bool { return g.ID == f.ID }) {
			r.folders = append(r.folders, f)
		}
	}
	// Deepest first, so a file under nested registered folders belongs to the nearest.
	sort.SliceStable(r.folders, func(i, j int) bool { return len(r.folders[i].Path) > len(r.folders[j].Path) })
	return r, nil
}

func (r *run) run(ctx context.Context) error {
	db := r.ix.DB
	// Everything stored in the workspace, by path: a file is matched to its stored
	// document whichever registered folder it was stored under.
	all, err := db.Folders(ctx, r.ws.ID)
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	stored := map[string]*store.Document{}
	for _, f := range all {
		docs, err := db.DocumentsByFolder(ctx, f.ID)
		if err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
		for i := range docs {
			stored[docs[i].Path] = &docs[i]
		}
	}

	files, left, protect, err := r.scan(ctx)
	if err != nil {
		return err
	}
	// Files the walk left out (binary, too large, …) are listed as skipped, with why.
	if err := r.keepSkips(ctx, left, stored); err != nil {
		return err
	}

	// Stored documents of the scanned folders that were not found are gone, unless an
	// error hid them (an unreadable folder is not an empty one).
	scanned := map[int64]bool{}
	for _, f := range r.folders {
		scanned[f.ID] = true
	}
	var gone []*store.Document
	for path, d := range stored {
		if scanned[d.FolderID] && files[path] == nil && left[path] == nil && !protected(protect, path) {
			gone = append(gone, d)
		}
	}
	sort.Slice(gone, func(i, j int) bool { return gone[i].Path < gone[j].Path })

	// Decide what each file needs.
	var jobs []job
	var fresh []*found // not stored anywhere: new, or the new name of a gone file
	for _, f := range files {
		d := stored[f.Path]
		switch {
		case d == nil:
			fresh = append(fresh, f)
		case d.Size != f.Size || !d.ModTime.Equal(f.ModTime) || d.Status == store.StatusPending:
			jobs = append(jobs, job{f: f, prev: d})
		case d.Status == store.StatusError && d.Hash == "":
			// The file could not even be read (permissions, say): cheap to retry, and
			// fixing permissions does not change the mtime.
			jobs = append(jobs, job{f: f, prev: d})
		case d.Status == store.StatusSkipped:
			r.sum.Skipped++
		default:
			r.sum.Unchanged++
		}
	}
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].f.Path < jobs[j].f.Path })
	sort.Slice(fresh, func(i, j int) bool { return fresh[i].Path < fresh[j].Path })

	// A new file with the content of a gone one is that file, moved: keep its chunks and
	// embeddings. Only files whose size matches a gone document are hashed here.
	gone, fresh, err = r.renames(ctx, gone, fresh)
	if err != nil {
		return err
	}
	for _, f := range fresh {
		jobs = append(jobs, job{f: f})
	}
	for _, d := range gone {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := db.DeleteDocument(ctx, d.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("ingest: %w", err)
		}
		r.sum.Deleted++
	}

	if err := r.parseAll(ctx, jobs); err != nil {
		return err
	}
	if r.ix.Embedder != nil {
		n, err := r.ix.embed(ctx, r.ws.ID, r.opt, r.emit)
		r.mu.Lock()
		r.sum.Embedded += n
		r.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// leftOut is a file the walk saw and left out, and why (a walk.Skip* reason).
type leftOut struct {
	path, rel, reason string
	folder            int64
}

// scan walks the folders. It returns the candidate files by path, the files the walk
// saw but left out (binary, too large, …; not the hidden and excluded ones, which it
// never looks at) by path, and the paths under which an error may hide files that
// still exist.
func (r *run) scan(ctx context.Context) (map[string]*found, map[string]*leftOut, []string, error) {
	files := map[string]*found{}
	left := map[string]*leftOut{}
	var protect []string
	wopt := r.opt.Walk
	userSkipped := wopt.Skipped
	var folder store.Folder // the one being walked
	wopt.Skipped = func(path, reason string) {
		switch reason {
		case walk.SkipTooLarge, walk.SkipBinary, walk.SkipSpecial, walk.SkipOutside, walk.SkipBroken:
			if left[path] == nil && files[path] == nil { // a deeper registered folder's, walked first
				rel, err := filepath.Rel(folder.Path, path)
				if err != nil {
					rel = path
				}
				left[path] = &leftOut{path: path, rel: filepath.ToSlash(rel), reason: reason, folder: folder.ID}
			}
		}
		if userSkipped != nil {
			userSkipped(path, reason)
		}
	}
	r.emit(Progress{Phase: PhaseScan}, true)
	for _, folder = range r.folders {
		wopt.FollowOutside = r.opt.Walk.FollowOutside || (r.opt.FollowOutside != nil && r.opt.FollowOutside(folder.Path))
		onErr := func(path string, err error) {
			if errors.Is(err, fs.ErrNotExist) {
				return // vanished during the walk: it is simply gone
			}
			protect = append(protect, path)
			r.docError(PhaseScan, path, err.Error())
		}
		err := walk.Walk(ctx, folder.Path, wopt, func(f walk.File) error {
			if files[f.Path] != nil {
				return nil // also under a deeper registered folder, walked first
			}
			files[f.Path] = &found{File: f, folder: folder.ID}
			r.sum.Files++
			r.emit(Progress{Phase: PhaseScan, FilesDone: r.sum.Files, Current: f.Path}, false)
			return nil
		}, onErr)
		if err := ctx.Err(); err != nil {
			return nil, nil, nil, err
		}
		if err != nil {
			// A missing or unreadable folder (an unmounted drive, say) is reported and
			// its documents kept.
			protect = append(protect, folder.Path)
			r.docError(PhaseScan, folder.Path, err.Error())
		}
	}
	return files, left, protect, nil
}

// keepSkips stores each file the walk left out as a skipped document with the reason
// in words, so that the documents list has every file the walk saw: indexed, skipped
// with a reason, or a problem. One stored so already is left alone; one indexed
// before (a file grown too large, say) loses its chunks.
func (r *run) keepSkips(ctx context.Context, left map[string]*leftOut, stored map[string]*store.Document) error {
	paths := make([]string, 0, len(left))
	for p := range left {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return err
		}
		l := left[p]
		r.skipped(l.path, l.reason)
		fi, err := os.Lstat(l.path)
		if err != nil {
			continue // gone meanwhile
		}
		reason := r.skipReason(l.reason, fi.Size())
		d := store.Document{WorkspaceID: r.ws.ID, FolderID: l.folder, Path: l.path, Rel: l.rel, Size: fi.Size(), ModTime: fi.ModTime(),
			Status: store.StatusSkipped, Error: reason}
		if old := stored[l.path]; old != nil && old.Status == store.StatusSkipped && old.Error == reason &&
			old.Size == d.Size && old.ModTime.Equal(d.ModTime) && old.FolderID == d.FolderID {
			continue
		}
		if err := r.ix.DB.ReplaceDocument(ctx, d, nil); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("ingest: %w", err)
		}
	}
	return nil
}

// skipReason says in words why the walk left a file out.
func (r *run) skipReason(reason string, size int64) string {
	switch reason {
	case walk.SkipBinary:
		return "not text, PDF or Word (.docx): its first bytes are binary"
	case walk.SkipTooLarge:
		limit := r.opt.Walk.MaxFileSize
		if limit == 0 {
			limit = walk.DefaultMaxFileSize
		}
		return fmt.Sprintf("too large: %s, over the %s limit", mib(size), mib(limit))
	case walk.SkipOutside:
		return "a link to outside the folder (not followed)"
	case walk.SkipBroken:
		return "a link to nothing"
	case walk.SkipSpecial:
		return "not a regular file"
	}
	return reason
}

func mib(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func protected(prefixes []string, path string) bool {
	for _, p := range prefixes {
		if path == p || strings.HasPrefix(path, p+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

func (r *run) renames(ctx context.Context, gone []*store.Document, fresh []*found) ([]*store.Document, []*found, error) {
	if len(gone) == 0 || len(fresh) == 0 {
		return gone, fresh, nil
	}
	bySize := map[int64][]*store.Document{}
	for _, d := range gone {
		if d.Status == store.StatusIndexed && d.Hash != "" {
			bySize[d.Size] = append(bySize[d.Size], d)
		}
	}
	renamed := map[int64]bool{}
	var rest []*found
	for _, f := range fresh {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		cands := bySize[f.Size]
		if len(cands) == 0 {
			rest = append(rest, f)
			continue
		}
		h, err := bounded(ctx, r.opt.DocTimeout, func(ctx context.Context) (string, error) { return hashFile(ctx, f.Path) })
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if err != nil {
			rest = append(rest, f) // the parse phase will report it
			continue
		}
		f.hash = h
		i := -1
		for j, d := range cands {
			if d.Hash == h && !renamed[d.ID] {
				i = j
				break
			}
		}
		if i < 0 {
			rest = append(rest, f)
			continue
		}
		d := cands[i]
		err = r.ix.DB.RenameDocument(ctx, d.ID, store.Document{FolderID: f.folder, Path: f.Path, Rel: f.Rel, Size: f.Size, ModTime: f.ModTime})
		if err != nil {
			return nil, nil, fmt.Errorf("ingest: %w", err)
		}
		renamed[d.ID] = true
		r.sum.Renamed++
	}
	var left []*store.Document
	for _, d := range gone {
		if !renamed[d.ID] {
			left = append(left, d)
		}
	}
	return left, rest, nil
}

func (r *run) parseAll(ctx context.Context, jobs []job) error {
	total := len(jobs)
	started := time.Now()
	done := 0
	r.emit(Progress{Phase: PhaseParse, FilesTotal: total}, true)
	ch := make(chan job)
	errc := make(chan error, r.opt.Workers)
	var wg sync.WaitGroup
	for range r.opt.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				if err := r.index(ctx, j); err != nil {
					errc <- err
					return
				}
				r.mu.Lock()
				done++
				p := Progress{Phase: PhaseParse, FilesDone: done, FilesTotal: total, Chunks: r.sum.Chunks, Current: j.f.Path}
				r.mu.Unlock()
				p.FilesPerSec, p.ETA = rate(p.FilesDone, total, time.Since(started))
				r.emit(p, p.FilesDone == total) // the last one always goes out, however fast parsing was
			}
		}()
	}
	var err error
feed:
	for _, j := range jobs {
		select {
		case ch <- j:
		case err = <-errc:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(ch)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errc:
		default:
		}
	}
	return err
}

func rate(done, total int, elapsed time.Duration) (float64, time.Duration) {
	if done == 0 || elapsed <= 0 {
		return 0, 0
	}
	perSec := float64(done) / elapsed.Seconds()
	return perSec, time.Duration(float64(total-done) / perSec * float64(time.Second))
}

// index handles one file. Only store failures and cancellation are returned; problems
// with the file itself are recorded against it.
func (r *run) index(ctx context.Context, j job) error {
	db := r.ix.DB
	f := j.f
	d := store.Document{WorkspaceID: r.ws.ID, FolderID: f.folder, Path: f.Path, Rel: f.Rel, Size: f.Size, ModTime: f.ModTime}
	// One budget for all the document's work in this process.
	dctx, cancel := context.WithTimeoutCause(ctx, r.opt.DocTimeout, ErrOverBudget)
	defer cancel()
	if f.hash == "" {
		h, err := bounded(dctx, 0, func(ctx context.Context) (string, error) { return hashFile(ctx, f.Path) })
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, fs.ErrNotExist):
			return r.vanished(ctx, j)
		case err != nil:
			return r.fail(ctx, d, r.budgetError(dctx, err))
		}
		f.hash = h
	}
	d.Hash = f.hash
	// Touched but not changed: only the stat moves.
	if p := j.prev; p != nil && p.Hash == d.Hash && p.Status != store.StatusPending {
		if err := db.TouchDocument(ctx, p.ID, f.Size, f.ModTime); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("ingest: %w", err)
		}
		r.count(func(s *Summary) {
			if p.Status == store.StatusSkipped {
				s.Skipped++
			} else {
				s.Unchanged++
			}
		})
		return nil
	}
	type parsed struct {
		doc    *parse.Doc
		chunks []chunk.Chunk
	}
	res, err := bounded(dctx, 0, func(ctx context.Context) (parsed, error) {
		doc, err := r.ix.Parser.Parse(ctx, f.Path)
		if err != nil {
			return parsed{}, err
		}
		chunks, err := chunk.SplitContext(ctx, doc, r.opt.Chunk)
		if err != nil {
			return parsed{}, fmt.Errorf("chunk %s: %w", f.Path, err)
		}
		return parsed{doc, chunks}, nil
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return r.vanished(ctx, j)
	case errors.Is(err, parse.ErrUnsupported):
		return r.skip(ctx, d, err.Error())
	case err != nil:
		return r.fail(ctx, d, r.budgetError(dctx, err))
	}
	doc, chunks := res.doc, res.chunks
	d.Parser, d.Title = doc.Parser, doc.Title
	if len(chunks) == 0 {
		return r.skip(ctx, d, "no text")
	}
	cs := make([]store.Chunk, len(chunks))
	for i, c := range chunks {
		cs[i] = store.Chunk{Ordinal: c.Ordinal, Text: c.Text, Tokens: c.Tokens, Page: c.Page,
			Heading: c.Heading, LineStart: c.LineStart, LineEnd: c.LineEnd}
	}
	d.Status = store.StatusIndexed
	if err := db.ReplaceDocument(ctx, d, cs); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("ingest: %w", err)
	}
	r.count(func(s *Summary) { s.Indexed++; s.Chunks += len(cs) })
	return nil
}

// vanished handles a file deleted between the walk and its parse.
func (r *run) vanished(ctx context.Context, j job) error {
	if j.prev == nil {
		return nil
	}
	if err := r.ix.DB.DeleteDocument(ctx, j.prev.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("ingest: %w", err)
	}
	r.count(func(s *Summary) { s.Deleted++ })
	return nil
}

func (r *run) skip(ctx context.Context, d store.Document, reason string) error {
	d.Status, d.Error = store.StatusSkipped, reason
	if err := r.ix.DB.ReplaceDocument(ctx, d, nil); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("ingest: %w", err)
	}
	r.skipped(d.Path, reason)
	return nil
}

// skipped counts a file left out and lists it while the list is short.
func (r *run) skipped(path, reason string) {
	r.count(func(s *Summary) {
		s.Skipped++
		if len(s.SkippedFiles) < MaxListedSkips {
			s.SkippedFiles = append(s.SkippedFiles, Skip{Path: path, Reason: reason})
		}
	})
}

// budgetError names the budget in err when the document ran over it: the error itself
// may only say that its context was cancelled.
func (r *run) budgetError(dctx context.Context, err error) error {
	if errors.Is(context.Cause(dctx), ErrOverBudget) && !errors.Is(err, ErrOverBudget) {
		return fmt.Errorf("%w of %v: %v", ErrOverBudget, r.opt.DocTimeout, err)
	}
	if errors.Is(err, ErrOverBudget) {
		return fmt.Errorf("%w of %v", ErrOverBudget, r.opt.DocTimeout)
	}
	return err
}

// abandonAfter is how long bounded waits, once its context is done, for work that did not
// notice.
const abandonAfter = 250 * time.Millisecond

// bounded runs fn in a goroutine of its own and waits for it, or for ctx to be done and
// then abandonAfter more. Everything fn runs checks ctx, but some waits cannot be
// interrupted (a read from a hung network drive), and one stuck document must hold up
// neither the run nor its cancellation: fn is then left to finish on its own and its
// result dropped. A budget > 0 bounds fn by a context of its own.
func bounded[T any](ctx context.Context, budget time.Duration, fn func(context.Context) (T, error)) (T, error) {
	if budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, budget, ErrOverBudget)
		defer cancel()
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1) // a goroutine left behind can still send, and then exit
	go func() {
		v, err := fn(ctx)
		ch <- result{v, err}
	}()
	select {
	case res := <-ch:
		return res.v, res.err
	case <-ctx.Done():
	}
	select {
	case res := <-ch:
		return res.v, res.err
	case <-time.After(abandonAfter):
		var zero T
		return zero, context.Cause(ctx)
	}
}

func (r *run) fail(ctx context.Context, d store.Document, cause error) error {
	if err := r.ix.DB.MarkDocumentError(ctx, d, cause.Error()); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("ingest: %w", err)
	}
	r.docError(PhaseParse, d.Path, cause.Error())
	return nil
}

func (r *run) docError(phase, path, reason string) {
	e := DocError{Path: path, Reason: reason}
	r.count(func(s *Summary) { s.Errors = append(s.Errors, e) })
	r.emit(Progress{Phase: phase, Current: path, Err: &e}, true)
}

func (r *run) count(fn func(*Summary)) {
	r.mu.Lock()
	fn(&r.sum)
	r.mu.Unlock()
}

// emit sends p to the progress callback, dropping it if one was sent in the last 100 ms
// unless force is set, and dropping a parse event older than one already sent (workers
// race here: a final count must stay the last one seen).
func (r *run) emit(p Progress, force bool) {
	if r.opt.Progress == nil {
		return
	}
	r.emitMu.Lock()
	defer r.emitMu.Unlock()
	now := time.Now()
	stale := p.Err == nil && p.Phase == PhaseParse && r.last.Phase == PhaseParse && p.FilesDone < r.last.FilesDone
	if stale || (!force && now.Sub(r.lastEmit) < 100*time.Millisecond) {
		return
	}
	r.lastEmit, r.last = now, p
	r.opt.Progress(p)
}

// hashFile hashes a file's content, checking ctx between reads.
func hashFile(ctx context.Context, path string) (string, error) {
	f, fi, err := parse.OpenRegular(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, max(min(fi.Size()+1, 64<<10), 512)) // most notes are small
	if _, err := io.CopyBuffer(h, ctxReader{ctx, f}, buf); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ctxReader fails reads once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if c.ctx.Err() != nil {
		return 0, context.Cause(c.ctx)
	}
	return c.r.Read(p)
}
