package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Workspace is a named set of folders searched together.
type Workspace struct {
	ID         int64     `json:"id"`
	Name       string    `json:"name"`
	Created    time.Time `json:"created"`
	Generation int64     `json:"generation"` // bumped whenever searchable content changes
}

// Folder is a root directory indexed into a workspace.
type Folder struct {
	ID          int64     `json:"id"`
	WorkspaceID int64     `json:"workspace_id"`
	Path        string    `json:"path"`
	Created     time.Time `json:"created"`
}

// EnsureWorkspace returns the workspace called name, creating it if needed.
func (db *DB) EnsureWorkspace(ctx context.Context, name string) (Workspace, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return Workspace{}, errors.New("store: workspace name is empty")
	}
	var w Workspace
	var created int64
	err := db.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO workspaces (name, created) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`,
			name, toNanos(time.Now())); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT id, name, created, generation FROM workspaces WHERE name = ?`, name).
			Scan(&w.ID, &w.Name, &created, &w.Generation)
	})
	if err != nil {
		return Workspace{}, fmt.Errorf("store: ensure workspace %q: %w", name, err)
	}
	w.Created = fromNanos(created)
	return w, nil
}

// ErrExists is returned (wrapped) when a name is taken.
var ErrExists = errors.New("already exists")

// CreateWorkspace creates a workspace called name; it fails with ErrExists when
// there is one.
func (db *DB) CreateWorkspace(ctx context.Context, name string) (Workspace, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return Workspace{}, errors.New("store: workspace name is empty")
	}
	w := Workspace{Name: name, Created: time.Now()}
	err := db.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO workspaces (name, created) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`,
			name, toNanos(w.Created))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return cmpErr(err, ErrExists)
		}
		return tx.QueryRowContext(ctx, `SELECT id FROM workspaces WHERE name = ?`, name).Scan(&w.ID)
	})
	if err != nil {
		return Workspace{}, fmt.Errorf("store: create workspace %q: %w", name, err)
	}
	return w, nil
}

// RenameWorkspace gives workspace id a new name; it fails with ErrExists when another
// workspace has it and with ErrNotFound when there is no workspace id.
func (db *DB) RenameWorkspace(ctx context.Context, id int64, name string) error {
	name = strings.TrimSpace(name)
	if name == "" {
		return errors.New("store: workspace name is empty")
	}
	err := db.tx(ctx, func(tx *sql.Tx) error {
		var other int64
		err := tx.QueryRowContext(ctx, `SELECT id FROM workspaces WHERE name = ?`, name).Scan(&other)
		switch {
		case err == nil && other == id:
			return nil // its name already
		case err == nil:
			return ErrExists
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE workspaces SET name = ? WHERE id = ?`, name, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return cmpErr(err, ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: rename workspace %d to %q: %w", id, name, err)
	}
	return nil
}

// cmpErr is err, or instead when err is nil.
func cmpErr(err, instead error) error {
	if err != nil {
		return err
	}
	return instead
}

// LastUsed returns, per workspace id, when it was last asked something: its latest
// chat turn or answered request (both indexed by workspace). Workspaces never asked
// anything are absent.
func (db *DB) LastUsed(ctx context.Context) (map[int64]time.Time, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT ws, max(t) FROM (
			SELECT workspace_id AS ws, max(updated) AS t FROM chats GROUP BY workspace_id
			UNION ALL SELECT workspace_id, max(created) FROM traces WHERE workspace_id IS NOT NULL GROUP BY workspace_id
		) WHERE t > 0 GROUP BY ws`)
	if err != nil {
		return nil, fmt.Errorf("store: last used: %w", err)
	}
	defer rows.Close()
	out := map[int64]time.Time{}
	for rows.Next() {
		var ws, t int64
		if err := rows.Scan(&ws, &t); err != nil {
			return nil, fmt.Errorf("store: last used: %w", err)
		}
		out[ws] = fromNanos(t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: last used: %w", err)
	}
	return out, nil
}

// Workspaces lists all workspaces by name.
func (db *DB) Workspaces(ctx context.Context) ([]Workspace, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, name, created, generation FROM workspaces ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: workspaces: %w", err)
	}
	defer rows.Close()
	var out []Workspace
	for rows.Next() {
		var w Workspace
		var created int64
		if err := rows.Scan(&w.ID, &w.Name, &created, &w.Generation); err != nil {
			return nil, fmt.Errorf("store: workspaces: %w", err)
		}
		w.Created = fromNanos(created)
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: workspaces: %w", err)
	}
	return out, nil
}

// DeleteWorkspace removes a workspace with everything in it: folders, documents, chunks,
// embeddings, chats and traces.
func (db *DB) DeleteWorkspace(ctx context.Context, id int64) error {
	var n int64
	err := db.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM workspaces WHERE id = ?`, id)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("store: delete workspace %d: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("store: delete workspace %d: %w", id, ErrNotFound)
	}
	return nil
}

// Generation returns the workspace's index generation. It changes in the same transaction
// as any change to searchable content, so a cached answer tagged with it is stale exactly
// when the numbers differ.
func (db *DB) Generation(ctx context.Context, ws int64) (int64, error) {
	var g int64
	err := db.r.QueryRowContext(ctx, `SELECT generation FROM workspaces WHERE id = ?`, ws).Scan(&g)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("store: generation of workspace %d: %w", ws, err)
	}
	return g, nil
}

// bump moves workspace ws to its next generation and returns it.
func bump(ctx context.Context, tx *sql.Tx, ws int64) (int64, error) {
	var gen int64
	err := tx.QueryRowContext(ctx, `UPDATE workspaces SET generation = generation + 1 WHERE id = ? RETURNING generation`, ws).Scan(&gen)
	if err != nil {
		return 0, fmt.Errorf("workspace %d: %w", ws, err)
	}
	return gen, nil
}

// AddFolder registers a folder (an absolute path) with a workspace; adding it again
// returns the existing one.
func (db *DB) AddFolder(ctx context.Context, ws int64, path string) (Folder, error) {
	if !filepath.IsAbs(path) {
		return Folder{}, fmt.Errorf("store: add folder %q: path must be absolute", path)
	}
	path = filepath.Clean(path)
	f := Folder{WorkspaceID: ws, Path: path}
	var created int64
	err := db.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO folders (workspace_id, path, created) VALUES (?, ?, ?)
			ON CONFLICT (workspace_id, path) DO NOTHING`, ws, path, toNanos(time.Now())); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT id, created FROM folders WHERE workspace_id = ? AND path = ?`, ws, path).
			Scan(&f.ID, &created)
	})
	if err != nil {
		return Folder{}, fmt.Errorf("store: add folder %q: %w", path, err)
	}
	f.Created = fromNanos(created)
	return f, nil
}

// RemoveFolder unregisters a folder and deletes its documents, chunks and embeddings.
func (db *DB) RemoveFolder(ctx context.Context, ws int64, path string) error {
	path = filepath.Clean(path)
	var n int64
	err := db.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM folders WHERE workspace_id = ? AND path = ?`, ws, path)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		_, err = bump(ctx, tx, ws)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: remove folder %q: %w", path, err)
	}
	if n == 0 {
		return fmt.Errorf("store: remove folder %q: %w", path, ErrNotFound)
	}
	return nil
}

// Folders lists a workspace's folders by path.
func (db *DB) Folders(ctx context.Context, ws int64) ([]Folder, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, path, created FROM folders WHERE workspace_id = ? ORDER BY path`, ws)
	if err != nil {
		return nil, fmt.Errorf("store: folders: %w", err)
	}
	defer rows.Close()
	var out []Folder
	for rows.Next() {
		f := Folder{WorkspaceID: ws}
		var created int64
		if err := rows.Scan(&f.ID, &f.Path, &created); err != nil {
			return nil, fmt.Errorf("store: folders: %w", err)
		}
		f.Created = fromNanos(created)
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: folders: %w", err)
	}
	return out, nil
}

// Setting decodes the JSON value stored under key into v. It reports false, leaving v
// alone, when the key is not set.
func (db *DB) Setting(ctx context.Context, key string, v any) (bool, error) {
	var raw string
	err := db.r.QueryRowContext(ctx, `SELECT value FROM settings WHERE key = ?`, key).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: setting %q: %w", key, err)
	}
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		return false, fmt.Errorf("store: setting %q: %w", key, err)
	}
	return true, nil
}

// PutSetting stores v, encoded as JSON, under key.
func (db *DB) PutSetting(ctx context.Context, key string, v any) error {
	if key == "" {
		return errors.New("store: setting key is empty")
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("store: setting %q: %w", key, err)
	}
	err = db.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO settings (key, value, updated) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated = excluded.updated`,
			key, string(raw), toNanos(time.Now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("store: setting %q: %w", key, err)
	}
	return nil
}
