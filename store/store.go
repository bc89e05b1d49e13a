// Package store keeps Lore's index in SQLite: workspaces, folders, documents, chunks with
// their FTS5 index, embeddings, settings, chats and request traces. It is the source of
// truth; anything in memory (the vector index, caches) is rebuilt from it.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	_ "github.com/mattn/go-sqlite3" // registers "sqlite3"; needs the sqlite_fts5 build tag
)

// ErrNotFound is returned (wrapped) when a requested row does not exist.
var ErrNotFound = errors.New("not found")

// DB is an open store. One connection writes (SQLite allows one writer anyway, and a Go-side
// queue is cheaper than busy waits); a small pool reads concurrently under WAL.
type DB struct {
	w    *sql.DB
	r    *sql.DB
	path string

	stats termStatsCache // FTS statistics for BM25 (search.go)
	terms tokenizer      // query words to index terms (search.go)
}

// Open opens or creates the database at path and upgrades its schema to the current version.
func Open(ctx context.Context, path string) (*DB, error) {
	if path == "" {
		return nil, errors.New("store: empty database path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := private(abs); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	w, err := sql.Open("sqlite3", dsn(abs, false))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", abs, err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open %s: %w", abs, err)
	}
	if err := checkFTS5(ctx, w); err != nil {
		w.Close()
		return nil, err
	}
	if err := migrate(ctx, w, migrations); err != nil {
		w.Close()
		return nil, fmt.Errorf("store: %s: %w", abs, err)
	}
	r, err := sql.Open("sqlite3", dsn(abs, true))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open %s: %w", abs, err)
	}
	r.SetMaxOpenConns(max(4, runtime.NumCPU()))
	return &DB{w: w, r: r, path: abs, stats: termStatsCache{n: -1}}, nil
}

// private makes the database and its WAL and shared-memory files readable
// by the user alone. SQLite creates the database 0644 (less the umask)
// and gives -wal and -shm the database's mode, so creating the database
// 0600 first covers all three; files left by an older Lore are tightened.
func private(abs string) error {
	f, err := os.OpenFile(abs, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) // an empty file is an empty database
	if err == nil {
		f.Close()
	} else if !errors.Is(err, os.ErrExist) {
		return err
	}
	if runtime.GOOS == "windows" {
		return nil
	}
	for _, p := range []string{abs, abs + "-wal", abs + "-shm"} {
		st, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, st.Mode().Perm()&0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

// dsn builds a SQLite URI. Pragmas go in the DSN so that every pooled connection gets them.
// synchronous=NORMAL is durable across application crashes under WAL; only an OS crash
// can lose the last commits, and never corrupts.
func dsn(abs string, readOnly bool) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // Windows: file:///C:/...
	}
	u := url.URL{Scheme: "file", Path: p}
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL")
	q.Set("_foreign_keys", "on")
	q.Set("_busy_timeout", "10000")
	q.Set("_cache_size", "-16000")
	if readOnly {
		q.Set("_query_only", "1")
	} else {
		// BEGIN IMMEDIATE takes the write lock up front, so a transaction never fails
		// half-way on a lock upgrade when another process (CLI and app) writes too.
		q.Set("_txlock", "immediate")
	}
	return u.String() + "?" + q.Encode()
}

func checkFTS5(ctx context.Context, db *sql.DB) error {
	var ok int
	if err := db.QueryRowContext(ctx, `SELECT sqlite_compileoption_used('ENABLE_FTS5')`).Scan(&ok); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if ok != 1 {
		return errors.New("store: SQLite was built without FTS5; build with -tags sqlite_fts5")
	}
	return nil
}

// Path returns the database file's absolute path.
func (db *DB) Path() string { return db.path }

// Close closes both connection pools.
func (db *DB) Close() error {
	return errors.Join(db.r.Close(), db.w.Close(), db.terms.close())
}

// tx runs fn in one write transaction, committed only if fn returns nil.
// execOne runs one statement that must change a row: ErrNotFound when it
// changed none; errors say what was being done.
func (db *DB) execOne(ctx context.Context, what, query string, args ...any) error {
	var n int64
	err := db.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err == nil && n == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	return nil
}

func (db *DB) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// Check verifies the database: SQLite's integrity and foreign-key checks, the FTS index
// against its content table, one FTS row per chunk, and that no chunk lacks a document.
func (db *DB) Check(ctx context.Context) error {
	var res string
	if err := db.w.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&res); err != nil {
		return fmt.Errorf("store: integrity check: %w", err)
	}
	if res != "ok" {
		return fmt.Errorf("store: integrity check: %s", res)
	}
	rows, err := db.w.QueryContext(ctx, `PRAGMA foreign_key_check`)
	if err != nil {
		return fmt.Errorf("store: foreign key check: %w", err)
	}
	bad := rows.Next()
	rows.Close()
	if bad {
		return errors.New("store: foreign key check: violations found")
	}
	if _, err := db.w.ExecContext(ctx, `INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)`); err != nil {
		return fmt.Errorf("store: fts check: %w", err)
	}
	// The docsize shadow table has one row per indexed FTS row.
	var nChunks, nFTS int
	if err := db.w.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM chunks), (SELECT count(*) FROM chunks_fts_docsize)`).Scan(&nChunks, &nFTS); err != nil {
		return fmt.Errorf("store: fts count: %w", err)
	}
	if nChunks != nFTS {
		return fmt.Errorf("store: %d chunks but %d FTS rows", nChunks, nFTS)
	}
	var n int
	if err := db.w.QueryRowContext(ctx, `SELECT count(*) FROM chunks c LEFT JOIN documents d ON d.id = c.document_id WHERE d.id IS NULL`).Scan(&n); err != nil {
		return fmt.Errorf("store: orphan check: %w", err)
	}
	if n > 0 {
		return fmt.Errorf("store: %d chunks without a document", n)
	}
	return nil
}

// Times are stored as Unix nanoseconds: file mtimes must round-trip exactly for the
// unchanged-file test, and one representation everywhere avoids mix-ups.
func toNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
