package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"lore/store"
)

// ErrOutsideLibrary refuses access to files outside a workspace's folders.
var ErrOutsideLibrary = errors.New("file is outside the workspace's folders")

// OpenDocument opens an indexed document for reading by its absolute path,
// as a passage gives it (Source.Path), and says which workspace holds it.
// Only a regular file inside the document's folder opens: it is opened
// through an os.Root on that folder, so a symlink or ".." that leads out of
// it — when checked or changed since — is refused with ErrOutsideLibrary. A
// path that is no workspace's indexed document, or whose file is gone, is
// ErrNotFound. A FIFO or device does not block the open: it is refused.
func (a *App) OpenDocument(ctx context.Context, path string) (f *os.File, workspace string, err error) {
	wss, err := a.db.Workspaces(ctx)
	if err != nil {
		return nil, "", err
	}
	path = filepath.Clean(path)
	for _, w := range wss {
		doc, err := a.db.DocumentByPath(ctx, w.ID, path)
		if errors.Is(err, store.ErrNotFound) || err == nil && doc.Status != store.StatusIndexed {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		f, _, err := a.openDocument(ctx, doc)
		if err != nil {
			return nil, "", err
		}
		return f, w.Name, nil
	}
	return nil, "", fmt.Errorf("%s is not an indexed document: %w", path, ErrNotFound)
}

// openDocument opens doc's file inside its folder (OpenDocument) and
// returns it with its real path (symlinks resolved), the one SourcePath
// hands to another program.
func (a *App) openDocument(ctx context.Context, doc store.Document) (*os.File, string, error) {
	folders, err := a.db.Folders(ctx, doc.WorkspaceID)
	if err != nil {
		return nil, "", err
	}
	folder := ""
	for _, f := range folders {
		if f.ID == doc.FolderID {
			folder = f.Path
		}
	}
	if folder == "" {
		return nil, "", fmt.Errorf("the folder of %s: %w", doc.Path, ErrNotFound)
	}
	// The folder and the file as they are now, so that a link inside the
	// folder written as an absolute path (which os.Root refuses) still
	// leads to its file; the open through the root then refuses any
	// change since that leads out.
	root, err := filepath.EvalSymlinks(folder)
	if err != nil {
		return nil, "", gone("folder "+folder, err)
	}
	real, err := filepath.EvalSymlinks(doc.Path)
	if err != nil {
		return nil, "", gone(doc.Path, err)
	}
	rel, err := filepath.Rel(root, real)
	if err != nil || !filepath.IsLocal(rel) {
		return nil, "", fmt.Errorf("%s: %w", doc.Path, ErrOutsideLibrary)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, "", gone("folder "+folder, err)
	}
	defer r.Close()
	f, err := r.OpenFile(rel, os.O_RDONLY|openNonBlocking, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, "", gone(doc.Path, err)
	case errors.Is(err, fs.ErrPermission):
		return nil, "", err
	case err != nil: // a link out, put there since it was resolved
		return nil, "", fmt.Errorf("%s: %w (%v)", doc.Path, ErrOutsideLibrary, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, "", err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, "", fmt.Errorf("%w: %s is not a regular file (%s)", ErrInvalid, doc.Path, st.Mode().Type())
	}
	return f, filepath.Join(root, rel), nil
}

// gone classifies a file that is not there as ErrNotFound.
func gone(what string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s is gone from disk: %w", what, ErrNotFound)
	}
	return err
}

// SourcePath returns the real path of the file behind a chunk, for another
// program to open, after opening it as OpenDocument does: a regular file
// inside its folder (symlinks resolved), so no caller can use it to reach
// an arbitrary path.
func (a *App) SourcePath(ctx context.Context, chunkID int64) (string, error) {
	hits, err := a.db.ChunkTexts(ctx, []int64{chunkID})
	if err != nil {
		return "", err
	}
	if len(hits) == 0 {
		return "", fmt.Errorf("chunk %d: %w", chunkID, ErrNotFound)
	}
	doc, err := a.db.Document(ctx, hits[0].DocumentID)
	if err != nil {
		return "", translate(err, "document of chunk %d", chunkID)
	}
	f, real, err := a.openDocument(ctx, doc)
	if err != nil {
		return "", err
	}
	f.Close()
	return real, nil
}
