package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"lore/engine"
	"lore/index/ingest"
	"lore/index/parse"
	"lore/index/retrieve"
	"lore/store"
)

// indexer runs indexing jobs in the background, one workspace at a time,
// and fans their progress out to subscribers (the CLI bar, the UI panel).
type indexer struct {
	a  *App
	ix *ingest.Indexer

	mu      sync.Mutex
	subs    map[int64]map[chan ingest.Progress]struct{}
	running map[int64]bool
	last    map[int64]ingest.Summary
	again   map[int64]bool // a run was asked for while one was busy
	watches map[int64]context.CancelFunc
	cancel  context.CancelFunc
	ctx     context.Context
	wg      sync.WaitGroup
}

// embedAdapter runs indexing embeddings at background priority, so a
// question's query embedding goes first; it yields between batches.
type embedAdapter struct{ e Embedder }

func (b embedAdapter) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return b.e.Embed(engine.WithPriority(ctx, engine.Background), texts)
}
func (b embedAdapter) ModelID() string { return b.e.ID() }

func newIndexer(a *App) *indexer {
	workerCmd := a.cfg.WorkerCmd
	if workerCmd == nil {
		if exe, err := os.Executable(); err == nil {
			workerCmd = []string{exe, parse.WorkerArg}
		}
	}
	ix := &ingest.Indexer{DB: a.db, Parser: parse.New(parse.Options{WorkerCmd: workerCmd})}
	if a.embed != nil {
		ix.Embedder = embedAdapter{a.embed}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &indexer{a: a, ix: ix, ctx: ctx, cancel: cancel,
		subs: map[int64]map[chan ingest.Progress]struct{}{}, running: map[int64]bool{}, last: map[int64]ingest.Summary{}, again: map[int64]bool{},
		watches: map[int64]context.CancelFunc{}}
}

// setEmbedder makes later runs embed with e (nil: none). A run in flight
// keeps the indexer it started with.
func (x *indexer) setEmbedder(e Embedder) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ix := &ingest.Indexer{DB: x.ix.DB, Parser: x.ix.Parser}
	if e != nil {
		ix.Embedder = embedAdapter{e}
	}
	x.ix = ix
	for ws := range x.watches {
		x.watchLocked(ws)
	}
}

// watch keeps a workspace current: a watcher re-indexes its folders as
// files change (Config.Watch; the server and desktop app turn it on). It
// restarts an existing watcher, which sees only the folders it started with.
func (x *indexer) watch(ws int64) {
	if !x.a.cfg.Watch {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.watchLocked(ws)
}

func (x *indexer) watchLocked(ws int64) {
	if cancel := x.watches[ws]; cancel != nil {
		cancel()
	}
	w, err := x.a.db.Workspaces(x.ctx)
	if err != nil {
		return
	}
	name := ""
	for _, v := range w {
		if v.ID == ws {
			name = v.Name
		}
	}
	if name == "" {
		delete(x.watches, ws)
		return
	}
	ctx, cancel := context.WithCancel(x.ctx)
	x.watches[ws] = cancel
	ix := x.ix
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		ix.Watch(ctx, name, nil, ingest.Options{Progress: func(p ingest.Progress) { x.publish(ws, p) }},
			func(sum ingest.Summary, err error) {
				x.a.retrieverNow().Refresh(ctx, ws)
				x.mu.Lock()
				x.last[ws] = sum
				x.mu.Unlock()
			})
	}()
}

func (x *indexer) stop() {
	x.cancel()
	x.wg.Wait()
}

func (x *indexer) publish(ws int64, p ingest.Progress) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for ch := range x.subs[ws] {
		select {
		case ch <- p:
		default: // a slow subscriber misses an update, never blocks indexing
		}
	}
}

// Index indexes folders (none: all of the workspace's) now, reporting
// progress to fn, and brings the vector index up to date.
func (a *App) Index(ctx context.Context, workspace string, folders []string, fn func(ingest.Progress)) (ingest.Summary, error) {
	ws, err := a.workspace(ctx, workspace)
	if err != nil {
		return ingest.Summary{}, err
	}
	for i, f := range folders {
		abs, err := filepath.Abs(f)
		if err != nil {
			return ingest.Summary{}, err
		}
		st, err := os.Stat(abs)
		if err != nil {
			return ingest.Summary{}, fmt.Errorf("folder %s: %w", f, err)
		}
		if !st.IsDir() {
			return ingest.Summary{}, fmt.Errorf("%s is not a folder", f)
		}
		folders[i] = abs
	}
	x := a.idx
	x.mu.Lock()
	x.running[ws.ID] = true
	x.mu.Unlock()
	defer func() {
		x.mu.Lock()
		delete(x.running, ws.ID)
		again := x.again[ws.ID]
		delete(x.again, ws.ID)
		x.mu.Unlock()
		if again && x.ctx.Err() == nil {
			a.StartIndex(ws.Name, nil) // changes that came in while this run was busy
		}
	}()
	var files int // the parse phase's total, carried into the embed phase's events
	x.mu.Lock()
	ix := x.ix
	x.mu.Unlock()
	sum, err := ix.Run(ctx, ws.Name, folders, ingest.Options{Progress: func(p ingest.Progress) {
		if p.Phase == ingest.PhaseParse {
			files = p.FilesTotal
		} else if p.Phase == ingest.PhaseEmbed && p.FilesTotal == 0 {
			p.FilesDone, p.FilesTotal = files, files
		}
		if fn != nil {
			fn(p)
		}
		x.publish(ws.ID, p)
	}})
	if rerr := a.retrieverNow().Refresh(context.WithoutCancel(ctx), ws.ID); rerr != nil && err == nil {
		err = fmt.Errorf("vector index: %w", rerr)
	}
	x.mu.Lock()
	x.last[ws.ID] = sum
	x.mu.Unlock()
	return sum, err
}

// StartIndex indexes in the background; progress goes to subscribers.
func (a *App) StartIndex(workspace string, folders []string) error {
	ws, err := a.workspace(a.idx.ctx, workspace)
	if err != nil {
		return err
	}
	x := a.idx
	x.mu.Lock()
	busy := x.running[ws.ID]
	if busy {
		x.again[ws.ID] = true // the running job starts another pass when it ends
	}
	x.mu.Unlock()
	if busy {
		return nil
	}
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		a.Index(x.ctx, ws.Name, folders, nil)
	}()
	return nil
}

// Subscribe returns a channel of the workspace's indexing progress and a
// func to stop listening.
func (a *App) Subscribe(workspace string) (<-chan ingest.Progress, func(), error) {
	ws, err := a.workspace(context.Background(), workspace)
	if err != nil {
		return nil, nil, err
	}
	x := a.idx
	ch := make(chan ingest.Progress, 64)
	x.mu.Lock()
	if x.subs[ws.ID] == nil {
		x.subs[ws.ID] = map[chan ingest.Progress]struct{}{}
	}
	x.subs[ws.ID][ch] = struct{}{}
	x.mu.Unlock()
	return ch, func() {
		x.mu.Lock()
		delete(x.subs[ws.ID], ch)
		x.mu.Unlock()
	}, nil
}

// IndexStatus says whether a workspace is being indexed and how the last
// run ended.
func (a *App) IndexStatus(workspace string) (running bool, last ingest.Summary) {
	ws, err := a.workspace(context.Background(), workspace)
	if err != nil {
		return false, last
	}
	x := a.idx
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.running[ws.ID], x.last[ws.ID]
}

// AddFolder registers a folder with a workspace and indexes it in the background.
func (a *App) AddFolder(ctx context.Context, workspace, path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return fmt.Errorf("folder %s: %w", path, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a folder", path)
	}
	ws, err := a.workspace(ctx, workspace)
	if err != nil {
		return err
	}
	if _, err := a.db.AddFolder(ctx, ws.ID, abs); err != nil {
		return err
	}
	a.idx.watch(ws.ID)
	return a.StartIndex(ws.Name, nil)
}

// RemoveFolder forgets a folder and its documents.
func (a *App) RemoveFolder(ctx context.Context, workspace, path string) error {
	ws, err := a.workspace(ctx, workspace)
	if err != nil {
		return err
	}
	if err := a.db.RemoveFolder(ctx, ws.ID, path); err != nil {
		return err
	}
	a.idx.watch(ws.ID)
	return a.retrieverNow().Refresh(ctx, ws.ID)
}

// ErrOutsideLibrary refuses access to files outside a workspace's folders.
var ErrOutsideLibrary = errors.New("file is outside the workspace's folders")

// SourcePath returns the file behind a chunk, after checking that it lies
// inside one of its workspace's folders (symlinks resolved), so no caller
// can use it to reach an arbitrary path.
func (a *App) SourcePath(ctx context.Context, chunkID int64) (string, store.Hit, error) {
	hits, err := a.db.ChunkTexts(ctx, []int64{chunkID})
	if err != nil {
		return "", store.Hit{}, err
	}
	if len(hits) == 0 {
		return "", store.Hit{}, fmt.Errorf("chunk %d not found", chunkID)
	}
	h := hits[0]
	doc, err := a.db.Document(ctx, h.DocumentID)
	if err != nil {
		return "", h, err
	}
	folders, err := a.db.Folders(ctx, doc.WorkspaceID)
	if err != nil {
		return "", h, err
	}
	real, err := filepath.EvalSymlinks(doc.Path)
	if err != nil {
		return "", h, fmt.Errorf("source %s: %w", doc.Path, err)
	}
	for _, f := range folders {
		root, err := filepath.EvalSymlinks(f.Path)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(root, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return real, h, nil
		}
	}
	return "", h, ErrOutsideLibrary
}

// Progress is indexing progress as the API and UI show it.
type Progress struct {
	Phase       string           `json:"phase"`
	FilesDone   int              `json:"files_done"`
	FilesTotal  int              `json:"files_total"`
	Chunks      int              `json:"chunks"`
	ChunksTotal int              `json:"chunks_total,omitempty"`
	FilesPerS   float64          `json:"files_per_s"`
	ETAs        float64          `json:"eta_s"`
	Current     string           `json:"current,omitempty"`
	Error       *ingest.DocError `json:"error,omitempty"`
}

// ProgressView converts an indexing progress event for the front doors.
func ProgressView(p ingest.Progress) Progress {
	return Progress{Phase: p.Phase, FilesDone: p.FilesDone, FilesTotal: p.FilesTotal, Chunks: p.Chunks,
		ChunksTotal: p.ChunksTotal, FilesPerS: p.FilesPerSec, ETAs: p.ETA.Seconds(), Current: p.Current, Error: p.Err}
}

// Search retrieves passages for a query without generating (lore search).
func (a *App) Search(ctx context.Context, workspace, query string, opt retrieve.Options) (retrieve.Result, error) {
	ws, err := a.workspace(ctx, workspace)
	if err != nil {
		return retrieve.Result{}, err
	}
	return a.retrieverNow().Search(ctx, ws.ID, query, opt)
}
