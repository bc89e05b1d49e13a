package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"lore/index/ingest"
	"lore/index/retrieve"
	"lore/store"
)

// lookup finds a workspace by name ("" is the default one). It never
// creates one: only CreateWorkspace, AddFolder and Index do.
func (a *App) lookup(ctx context.Context, name string) (store.Workspace, error) {
	if name == "" {
		name = DefaultWorkspace
	}
	wss, err := a.db.Workspaces(ctx)
	if err != nil {
		return store.Workspace{}, err
	}
	for _, w := range wss {
		if w.Name == name {
			return w, nil
		}
	}
	return store.Workspace{}, fmt.Errorf("workspace %q: %w", name, ErrNotFound)
}

// ensure finds or creates a workspace, for the calls that add to one. A
// new one's name must be valid (validName); one that exists is found
// whatever its name (older versions allowed more).
func (a *App) ensure(ctx context.Context, name string) (store.Workspace, error) {
	w, err := a.lookup(ctx, name)
	if !errors.Is(err, ErrNotFound) {
		return w, err
	}
	name = cmp.Or(name, DefaultWorkspace)
	if err := validName(name); err != nil {
		return store.Workspace{}, err
	}
	return a.db.EnsureWorkspace(ctx, name)
}

// NameRule says which workspace names are accepted.
const NameRule = "a workspace name is 1–64 letters, digits, spaces, hyphens (-), underscores (_) and dots (.), starting with a letter or digit"

// validName checks a new workspace name: one that reads well in a menu,
// a URL and a command line (NameRule).
func validName(name string) error {
	ok := name != "" && utf8.RuneCountInString(name) <= 64 && utf8.ValidString(name) && name == strings.TrimSpace(name)
	for i, r := range name {
		if !ok {
			break
		}
		alnum := unicode.IsLetter(r) || unicode.IsDigit(r)
		ok = alnum || i > 0 && (r == ' ' || r == '-' || r == '_' || r == '.')
	}
	if !ok {
		return fmt.Errorf("%w: %q: %s", ErrInvalid, name, NameRule)
	}
	return nil
}

// absFolders checks that each path is a folder and makes it absolute.
func absFolders(paths []string) ([]string, error) {
	out := make([]string, len(paths))
	for i, f := range paths {
		abs, err := filepath.Abs(f)
		if err != nil {
			return nil, err
		}
		st, err := os.Stat(abs)
		if err != nil {
			return nil, fmt.Errorf("%w: folder %s: %v", ErrInvalid, f, err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("%w: %s is not a folder", ErrInvalid, f)
		}
		out[i] = abs
	}
	return out, nil
}

// Index indexes folders (none: all of the workspace's) now, reporting
// progress to fn, and brings the vector index up to date. It waits for a
// run of the same workspace that is already going.
func (a *App) Index(ctx context.Context, workspace string, folders []string, fn func(Progress)) (Summary, error) {
	folders, err := absFolders(folders)
	if err != nil {
		return Summary{}, err
	}
	ws, err := a.ensure(ctx, workspace)
	if err != nil {
		return Summary{}, err
	}
	return a.jobs.get(ws).do(ctx, folders, fn)
}

// StartIndex indexes a workspace's folders in the background; progress
// goes to subscribers. Asked while a run is going, it runs once more after.
func (a *App) StartIndex(ctx context.Context, workspace string) error {
	ws, err := a.lookup(ctx, workspace)
	if err != nil {
		return err
	}
	a.jobs.get(ws).request()
	return nil
}

// AddFolder registers a folder with a workspace and indexes it in the background.
func (a *App) AddFolder(ctx context.Context, workspace, path string) error {
	abs, err := absFolders([]string{path})
	if err != nil {
		return err
	}
	ws, err := a.ensure(ctx, workspace)
	if err != nil {
		return err
	}
	if _, err := a.db.AddFolder(ctx, ws.ID, abs[0]); err != nil {
		return err
	}
	x := a.jobs.get(ws)
	if a.cfg.Watch {
		x.watch() // it also asks for a run
	} else {
		x.request()
	}
	return nil
}

// RemoveFolder forgets a folder and its documents.
func (a *App) RemoveFolder(ctx context.Context, workspace, path string) error {
	ws, err := a.lookup(ctx, workspace)
	if err != nil {
		return err
	}
	if err := a.db.RemoveFolder(ctx, ws.ID, path); err != nil {
		return translate(err, "folder %q of workspace %q", path, ws.Name)
	}
	if a.cfg.Watch {
		a.jobs.get(ws).watch()
	}
	return a.current().retriever.Refresh(ctx, ws.ID)
}

// Phases of an indexing run, in order.
const (
	PhaseScan  = ingest.PhaseScan
	PhaseParse = ingest.PhaseParse
	PhaseEmbed = ingest.PhaseEmbed
	PhaseDone  = ingest.PhaseDone
)

// Progress is indexing progress as the API and UI show it.
type Progress struct {
	Phase       string    `json:"phase"`
	FilesDone   int       `json:"files_done"`
	FilesTotal  int       `json:"files_total"`
	Chunks      int       `json:"chunks"`
	ChunksTotal int       `json:"chunks_total,omitempty"`
	FilesPerS   float64   `json:"files_per_s"`
	ETAs        float64   `json:"eta_s"`
	Current     string    `json:"current,omitempty"`
	Error       *DocError `json:"error,omitempty"`
}

// DocError is a file that could not be indexed and why.
type DocError struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Summary is the outcome of an indexing run.
type Summary struct {
	Files     int `json:"files"`     // candidate files found
	Indexed   int `json:"indexed"`   // parsed and stored
	Unchanged int `json:"unchanged"` // same size and mtime, or same content
	Skipped   int `json:"skipped"`   // binary, too large, unsupported, empty, links outside the folder
	// SkippedFiles lists (the first thousand of) the files skipped in this
	// run, each with its reason.
	SkippedFiles []DocError `json:"skipped_files"`
	Deleted      int        `json:"deleted"`
	Renamed      int        `json:"renamed"`
	Chunks       int        `json:"chunks"`   // chunks written
	Embedded     int        `json:"embedded"` // chunks embedded
	Errors       []DocError `json:"errors"`
	Seconds      float64    `json:"seconds"`
}

func progressOf(p ingest.Progress) Progress {
	v := Progress{Phase: p.Phase, FilesDone: p.FilesDone, FilesTotal: p.FilesTotal, Chunks: p.Chunks,
		ChunksTotal: p.ChunksTotal, FilesPerS: p.FilesPerSec, ETAs: p.ETA.Seconds(), Current: p.Current}
	if p.Err != nil {
		v.Error = &DocError{Path: p.Err.Path, Reason: p.Err.Reason}
	}
	return v
}

func summaryOf(s ingest.Summary) Summary {
	out := Summary{Files: s.Files, Indexed: s.Indexed, Unchanged: s.Unchanged, Skipped: s.Skipped, Deleted: s.Deleted,
		Renamed: s.Renamed, Chunks: s.Chunks, Embedded: s.Embedded, Seconds: s.Seconds, Errors: []DocError{}, SkippedFiles: []DocError{}}
	for _, k := range s.SkippedFiles {
		out.SkippedFiles = append(out.SkippedFiles, DocError{Path: k.Path, Reason: k.Reason})
	}
	for _, e := range s.Errors {
		out.Errors = append(out.Errors, DocError{Path: e.Path, Reason: e.Reason})
	}
	return out
}

// SearchOptions tune a search without generation.
type SearchOptions struct {
	TopK     int  // passages returned (default 8)
	EfSearch int  // HNSW beam (0: the index's default)
	NoCache  bool // neither read nor fill the result cache
}

// SearchResult is what a search found and what it cost.
type SearchResult struct {
	Passages      []Source `json:"passages"`
	Mode          string   `json:"mode"`               // hybrid, bm25 or vector
	Degraded      string   `json:"degraded,omitempty"` // why not hybrid
	CacheHit      bool     `json:"cache_hit"`
	EmbedCacheHit bool     `json:"embed_cache_hit"`
	// Stage times in milliseconds: embed_ms, vector_ms, bm25_ms, fuse_ms.
	Stages map[string]float64 `json:"stages"`
}

// Search retrieves passages for a query without generating (lore search).
func (a *App) Search(ctx context.Context, workspace, query string, opt SearchOptions) (SearchResult, error) {
	if err := CheckText("query", query, MaxQuestion); err != nil {
		return SearchResult{}, err
	}
	ws, err := a.lookup(ctx, workspace)
	if err != nil {
		return SearchResult{}, err
	}
	m, let := a.hold()
	defer let()
	res, err := m.retriever.Search(ctx, ws.ID, query, retrieve.Options{TopK: opt.TopK, EfSearch: opt.EfSearch, NoCache: opt.NoCache})
	if err != nil {
		return SearchResult{}, err
	}
	out := SearchResult{Passages: toSources(res.Passages), Mode: res.Mode, Degraded: res.Degraded, CacheHit: res.CacheHit,
		EmbedCacheHit: res.EmbedCacheHit, Stages: map[string]float64{StageEmbed: round(res.Timing.Embed.Ms),
			StageVector: round(res.Timing.Vector.Ms), StageBM25: round(res.Timing.BM25.Ms),
			"fuse_ms": round(res.Timing.Fuse.Ms), StageTotal: round(res.Timing.Total.Ms)}}
	return out, nil
}

// translate turns a store error into the app's classification.
func translate(err error, format string, args ...any) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrNotFound)
	}
	return err
}
