package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Status is a document's indexing state.
type Status string

const (
	StatusPending Status = "pending" // known, not yet parsed
	StatusIndexed Status = "indexed" // chunks stored; set only in the transaction that stores them
	StatusError   Status = "error"   // parsing failed; Error says why
	StatusSkipped Status = "skipped" // deliberately not indexed (unsupported, too large)
)

func (s Status) valid() bool {
	switch s {
	case StatusPending, StatusIndexed, StatusError, StatusSkipped:
		return true
	}
	return false
}

// Document is one file of a folder.
type Document struct {
	ID          int64     `json:"id"`
	WorkspaceID int64     `json:"workspace_id"`
	FolderID    int64     `json:"folder_id"`
	Path        string    `json:"path"` // absolute
	Rel         string    `json:"rel"`  // relative to the folder, for display
	Size        int64     `json:"size"`
	ModTime     time.Time `json:"mtime"`
	Hash        string    `json:"hash"` // hex sha256 of the content
	Parser      string    `json:"parser"`
	Title       string    `json:"title,omitempty"`
	Status      Status    `json:"status"`
	Error       string    `json:"error,omitempty"`
	IndexedAt   time.Time `json:"indexed_at"`
}

// Chunk is a passage of a document, the unit of retrieval.
type Chunk struct {
	ID         int64  `json:"id"`
	DocumentID int64  `json:"document_id"`
	Ordinal    int    `json:"ordinal"`
	Text       string `json:"text"`
	Tokens     int    `json:"tokens"`
	Page       int    `json:"page,omitempty"`
	Heading    string `json:"heading,omitempty"` // heading path, e.g. "Install > Linux"
	LineStart  int    `json:"line_start,omitempty"`
	LineEnd    int    `json:"line_end,omitempty"`
}

const docCols = `id, workspace_id, folder_id, path, rel, size, mtime, hash, parser, title, status, error, indexed_at`

func scanDoc(s interface{ Scan(...any) error }) (Document, error) {
	var d Document
	var mtime, indexed int64
	err := s.Scan(&d.ID, &d.WorkspaceID, &d.FolderID, &d.Path, &d.Rel, &d.Size, &mtime, &d.Hash,
		&d.Parser, &d.Title, &d.Status, &d.Error, &indexed)
	d.ModTime, d.IndexedAt = fromNanos(mtime), fromNanos(indexed)
	return d, err
}

// Document returns the document with the given id.
func (db *DB) Document(ctx context.Context, id int64) (Document, error) {
	d, err := scanDoc(db.r.QueryRowContext(ctx, `SELECT `+docCols+` FROM documents WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Document{}, fmt.Errorf("store: document %d: %w", id, err)
	}
	return d, nil
}

// DocumentByPath returns the workspace's document at path.
func (db *DB) DocumentByPath(ctx context.Context, ws int64, path string) (Document, error) {
	d, err := scanDoc(db.r.QueryRowContext(ctx, `SELECT `+docCols+` FROM documents WHERE workspace_id = ? AND path = ?`, ws, path))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Document{}, fmt.Errorf("store: document %q: %w", path, err)
	}
	return d, nil
}

// DocumentsByFolder lists a folder's documents (without chunks), for diffing against disk.
func (db *DB) DocumentsByFolder(ctx context.Context, folderID int64) ([]Document, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+docCols+` FROM documents WHERE folder_id = ? ORDER BY path`, folderID)
	if err != nil {
		return nil, fmt.Errorf("store: documents of folder %d: %w", folderID, err)
	}
	defer rows.Close()
	var out []Document
	for rows.Next() {
		d, err := scanDoc(rows)
		if err != nil {
			return nil, fmt.Errorf("store: documents of folder %d: %w", folderID, err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: documents of folder %d: %w", folderID, err)
	}
	return out, nil
}

// ReplaceDocument stores d (matched to an existing row by workspace and path) with exactly
// the given chunks, in one transaction: old chunks, their FTS rows and embeddings go, the
// new ones come in (a new chunk whose text an old one had keeps that one's embeddings), and
// the workspace generation moves (if any chunk came or went). Readers see either the old or the
// new document, never a mix. An empty Status means StatusIndexed. Invalid UTF-8 in chunk
// text is replaced with U+FFFD rather than refused.
func (db *DB) ReplaceDocument(ctx context.Context, d Document, chunks []Chunk) error {
	if d.Status == "" {
		d.Status = StatusIndexed
	}
	if err := validDoc(d); err != nil {
		return fmt.Errorf("store: replace document: %w", err)
	}
	if d.Status == StatusIndexed && d.IndexedAt.IsZero() {
		d.IndexedAt = time.Now()
	}
	err := db.tx(ctx, func(tx *sql.Tx) error {
		id, err := upsertDoc(ctx, tx, d)
		if err != nil {
			return err
		}
		vecs, err := oldVectors(ctx, tx, id)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM chunks WHERE document_id = ?`, id)
		if err != nil {
			return err
		}
		deleted, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if deleted == 0 && len(chunks) == 0 {
			return nil // nothing searchable changed
		}
		gen, err := bump(ctx, tx, d.WorkspaceID)
		if err != nil || len(chunks) == 0 {
			return err
		}
		ins, err := tx.PrepareContext(ctx, `INSERT INTO chunks (document_id, ordinal, text, tokens, page, heading, line_start, line_end)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`)
		if err != nil {
			return err
		}
		defer ins.Close()
		keep, err := tx.PrepareContext(ctx, `INSERT INTO embeddings (chunk_id, model, dim, vec, generation) VALUES (?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer keep.Close()
		for _, c := range chunks {
			text := validUTF8(c.Text)
			var cid int64
			if err := ins.QueryRowContext(ctx, id, c.Ordinal, text, c.Tokens, c.Page,
				validUTF8(c.Heading), c.LineStart, c.LineEnd).Scan(&cid); err != nil {
				return fmt.Errorf("chunk %d: %w", c.Ordinal, err)
			}
			for _, v := range vecs[text] {
				if _, err := keep.ExecContext(ctx, cid, v.model, v.dim, v.vec, gen); err != nil {
					return fmt.Errorf("chunk %d: keep its embedding: %w", c.Ordinal, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: replace document %q: %w", d.Path, err)
	}
	return nil
}

// storedVector is an embedding row, kept across a document's re-parse.
type storedVector struct {
	model string
	dim   int
	vec   []byte
}

// oldVectors returns the embeddings of document id's chunks by chunk text:
// a chunk whose text comes back unchanged keeps them (embeddings are of the
// text alone), so an edited document or a re-parse costs only the chunks
// that changed, and a remote embedder is sent only those.
func oldVectors(ctx context.Context, tx *sql.Tx, id int64) (map[string][]storedVector, error) {
	rows, err := tx.QueryContext(ctx, `SELECT c.text, e.model, e.dim, e.vec FROM chunks c
		JOIN embeddings e ON e.chunk_id = c.id WHERE c.document_id = ?`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]storedVector{}
	seen := map[[2]string]bool{} // text, model: a text repeated in the document is stored once
	for rows.Next() {
		var text string
		var v storedVector
		if err := rows.Scan(&text, &v.model, &v.dim, &v.vec); err != nil {
			return nil, err
		}
		if k := [2]string{text, v.model}; !seen[k] {
			seen[k] = true
			out[text] = append(out[text], v)
		}
	}
	return out, rows.Err()
}

// MarkDocumentError records that d could not be indexed and why. Its old chunks are
// removed: they describe content that is no longer there.
func (db *DB) MarkDocumentError(ctx context.Context, d Document, reason string) error {
	d.Status, d.Error = StatusError, reason
	return db.ReplaceDocument(ctx, d, nil)
}

func validDoc(d Document) error {
	switch {
	case d.WorkspaceID == 0:
		return errors.New("document has no workspace")
	case d.FolderID == 0:
		return errors.New("document has no folder")
	case d.Path == "":
		return errors.New("document has no path")
	case !d.Status.valid():
		return fmt.Errorf("invalid document status %q", d.Status)
	}
	return nil
}

func upsertDoc(ctx context.Context, tx *sql.Tx, d Document) (int64, error) {
	var id int64
	err := tx.QueryRowContext(ctx, `INSERT INTO documents
		(workspace_id, folder_id, path, rel, size, mtime, hash, parser, title, status, error, indexed_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (workspace_id, path) DO UPDATE SET
			folder_id = excluded.folder_id, rel = excluded.rel, size = excluded.size, mtime = excluded.mtime,
			hash = excluded.hash, parser = excluded.parser, title = excluded.title, status = excluded.status,
			error = excluded.error, indexed_at = excluded.indexed_at
		RETURNING id`,
		d.WorkspaceID, d.FolderID, d.Path, d.Rel, d.Size, toNanos(d.ModTime), d.Hash, d.Parser,
		validUTF8(d.Title), string(d.Status), validUTF8(d.Error), toNanos(d.IndexedAt)).Scan(&id)
	return id, err
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// RenameDocument moves document id to another path (and possibly folder), keeping its
// chunks and embeddings: a moved file is not re-parsed or re-embedded. Only FolderID,
// Path, Rel, Size and ModTime of to are used.
func (db *DB) RenameDocument(ctx context.Context, id int64, to Document) error {
	if to.Path == "" || to.FolderID == 0 {
		return fmt.Errorf("store: rename document %d: target path and folder are required", id)
	}
	err := db.tx(ctx, func(tx *sql.Tx) error {
		var ws int64
		err := tx.QueryRowContext(ctx, `UPDATE documents SET folder_id = ?, path = ?, rel = ?, size = ?, mtime = ?
			WHERE id = ? RETURNING workspace_id`, to.FolderID, to.Path, to.Rel, to.Size, toNanos(to.ModTime), id).Scan(&ws)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		_, err = bump(ctx, tx, ws)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: rename document %d to %q: %w", id, to.Path, err)
	}
	return nil
}

// TouchDocument records a new size and mtime for a document whose content hash did not
// change. Searchable content is the same, so the generation stays.
func (db *DB) TouchDocument(ctx context.Context, id int64, size int64, mtime time.Time) error {
	return db.execOne(ctx, fmt.Sprintf("touch document %d", id), `UPDATE documents SET size = ?, mtime = ? WHERE id = ?`, size, toNanos(mtime), id)
}

// DeleteDocument removes a document with its chunks and embeddings.
func (db *DB) DeleteDocument(ctx context.Context, id int64) error {
	err := db.tx(ctx, func(tx *sql.Tx) error {
		var ws int64
		err := tx.QueryRowContext(ctx, `DELETE FROM documents WHERE id = ? RETURNING workspace_id`, id).Scan(&ws)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		_, err = bump(ctx, tx, ws)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: delete document %d: %w", id, err)
	}
	return nil
}

// Chunks returns a document's chunks in order.
func (db *DB) Chunks(ctx context.Context, docID int64) ([]Chunk, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, ordinal, text, tokens, page, heading, line_start, line_end
		FROM chunks WHERE document_id = ? ORDER BY ordinal`, docID)
	if err != nil {
		return nil, fmt.Errorf("store: chunks of document %d: %w", docID, err)
	}
	defer rows.Close()
	var out []Chunk
	for rows.Next() {
		c := Chunk{DocumentID: docID}
		if err := rows.Scan(&c.ID, &c.Ordinal, &c.Text, &c.Tokens, &c.Page, &c.Heading, &c.LineStart, &c.LineEnd); err != nil {
			return nil, fmt.Errorf("store: chunks of document %d: %w", docID, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: chunks of document %d: %w", docID, err)
	}
	return out, nil
}

// Counts summarises a workspace's index.
type Counts struct {
	Documents map[Status]int `json:"documents"`
	Chunks    int            `json:"chunks"`
	Embedded  int            `json:"embedded"` // chunks with an embedding for the model asked about
}

// Counts returns document counts by status, the chunk count, and how many chunks have an
// embedding from model (empty: none counted).
func (db *DB) Counts(ctx context.Context, ws int64, model string) (Counts, error) {
	c := Counts{Documents: map[Status]int{}}
	rows, err := db.r.QueryContext(ctx, `SELECT status, count(*) FROM documents WHERE workspace_id = ? GROUP BY status`, ws)
	if err != nil {
		return c, fmt.Errorf("store: counts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var s Status
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return c, fmt.Errorf("store: counts: %w", err)
		}
		c.Documents[s] = n
	}
	if err := rows.Err(); err != nil {
		return c, fmt.Errorf("store: counts: %w", err)
	}
	err = db.r.QueryRowContext(ctx, `SELECT count(*), count(e.chunk_id) FROM chunks c
		JOIN documents d ON d.id = c.document_id
		LEFT JOIN embeddings e ON e.chunk_id = c.id AND e.model = ?
		WHERE d.workspace_id = ?`, model, ws).Scan(&c.Chunks, &c.Embedded)
	if err != nil {
		return c, fmt.Errorf("store: counts: %w", err)
	}
	return c, nil
}

// ChunkCounts returns the number of chunks of each of the workspace's documents.
func (db *DB) ChunkCounts(ctx context.Context, ws int64) (map[int64]int, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT c.document_id, count(*) FROM chunks c
		JOIN documents d ON d.id = c.document_id WHERE d.workspace_id = ? GROUP BY c.document_id`, ws)
	if err != nil {
		return nil, fmt.Errorf("store: chunk counts: %w", err)
	}
	defer rows.Close()
	out := map[int64]int{}
	for rows.Next() {
		var id int64
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("store: chunk counts: %w", err)
		}
		out[id] = n
	}
	return out, rows.Err()
}
