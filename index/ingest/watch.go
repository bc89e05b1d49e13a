package ingest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"lore/index/walk"
)

// Watch indexes folders (none: the workspace's registered folders, as they are now) once,
// then watches them and runs an incremental Run after each burst of changes, calling
// onChange with its outcome. Runs never overlap. It blocks until ctx is done and then
// returns nil.
func (ix *Indexer) Watch(ctx context.Context, workspace string, folders []string, opt Options, onChange func(Summary, error)) error {
	roots, err := ix.roots(ctx, workspace, folders)
	if err != nil {
		return err
	}
	wake := make(chan struct{}, 1)
	wake <- struct{}{} // the initial run
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-wake:
				s, err := ix.Run(ctx, workspace, folders, opt)
				if ctx.Err() == nil && onChange != nil {
					onChange(s, err)
				}
			}
		}
	}()
	err = WatchChanges(ctx, roots, opt, func() {
		select {
		case wake <- struct{}{}:
		default: // a run is already due; it will see these changes too
		}
	})
	<-done
	return err
}

// WatchChanges watches roots and calls changed after each burst of changes to their
// files, until ctx is done; then it returns nil. It indexes nothing itself: the caller
// runs (and serialises) the indexing, and changed must not block.
//
// fsnotify does not recurse on Linux, so every subfolder gets its own watch, and new
// ones are added as they appear. Hidden and default-excluded folders (node_modules, ...)
// are not watched; symlinked folders are indexed by Run but not watched. Problems adding
// watches are reported through opt.Progress as errors.
func WatchChanges(ctx context.Context, roots []string, opt Options, changed func()) error {
	debounce := opt.Debounce
	if debounce <= 0 {
		debounce = 500 * time.Millisecond
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("ingest: watch: %w", err)
	}
	defer w.Close()
	report := func(path string, err error) {
		if opt.Progress != nil {
			opt.Progress(Progress{Phase: PhaseScan, Current: path, Err: &DocError{Path: path, Reason: "watch: " + err.Error()}})
		}
	}
	skipDirs := map[string]bool{}
	if !opt.Walk.NoDefaultExcludes {
		for _, p := range walk.DefaultExcludes() {
			if name, ok := strings.CutSuffix(p, "/"); ok {
				skipDirs[name] = true
			}
		}
	}
	addTree := func(root string) {
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					report(path, err)
				}
				return nil
			}
			if !d.IsDir() {
				return nil
			}
			if path != root && (strings.HasPrefix(d.Name(), ".") || skipDirs[d.Name()]) {
				return filepath.SkipDir
			}
			if err := w.Add(path); err != nil {
				report(path, err)
			}
			return nil
		})
	}
	for _, r := range roots {
		addTree(r)
	}

	// A steady stream of events still reports at least every 10 debounce periods.
	var (
		timer   = time.NewTimer(debounce)
		pending bool
		first   time.Time
	)
	timer.Stop()
	schedule := func() {
		now := time.Now()
		if !pending {
			pending, first = true, now
		}
		wait := debounce
		if limit := first.Add(10 * debounce).Sub(now); limit < wait {
			wait = max(limit, 0)
		}
		timer.Reset(wait)
	}
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			name := filepath.Base(ev.Name)
			if strings.HasPrefix(name, ".") || strings.HasSuffix(name, "~") || ev.Op == fsnotify.Chmod {
				continue // editor swap files; a chmod alone changes no content
			}
			if ev.Has(fsnotify.Create) {
				if fi, err := lstatDir(ev.Name); err == nil && fi && !skipDirs[name] {
					addTree(ev.Name)
				}
			}
			schedule()
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			report("", err)
			if errors.Is(err, fsnotify.ErrEventOverflow) { // events were lost: rescan
				schedule()
			}
		case <-timer.C:
			pending = false
			changed()
		}
	}
}

// roots returns the absolute folders to watch.
func (ix *Indexer) roots(ctx context.Context, workspace string, folders []string) ([]string, error) {
	if len(folders) > 0 {
		var out []string
		for _, f := range folders {
			abs, err := filepath.Abs(f)
			if err != nil {
				return nil, fmt.Errorf("ingest: watch %q: %w", f, err)
			}
			out = append(out, abs)
		}
		return out, nil
	}
	ws, err := ix.DB.EnsureWorkspace(ctx, workspace)
	if err != nil {
		return nil, fmt.Errorf("ingest: watch: %w", err)
	}
	fl, err := ix.DB.Folders(ctx, ws.ID)
	if err != nil {
		return nil, fmt.Errorf("ingest: watch: %w", err)
	}
	var out []string
	for _, f := range fl {
		out = append(out, f.Path)
	}
	return out, nil
}

func lstatDir(path string) (bool, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return false, err
	}
	return fi.IsDir(), nil
}
