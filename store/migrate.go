package store

import (
	"context"
	"database/sql"
	"fmt"
)

// A migration moves the schema up one version. The schema version is PRAGMA user_version,
// the number of migrations applied. Append only: never edit a released migration.
type migration func(ctx context.Context, tx *sql.Tx) error

var migrations = []migration{
	execAll(schemaV1...), // 1: index
	execAll(schemaV2...), // 2: traces
	execAll(schemaV3...), // 3: chats
	execAll(schemaV4...), // 4: FTS term statistics
	execAll(schemaV5...), // 5: embedding write generations
	execAll(schemaV6...), // 6: headings in the FTS index
	execAll(schemaV7...), // 7: plain text parsed again (manual pages' headings)
	execAll(schemaV8...), // 8: what a turn showed and carried; chat search
}

func execAll(stmts ...string) migration {
	return func(ctx context.Context, tx *sql.Tx) error {
		for _, s := range stmts {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return fmt.Errorf("%w in %.60q", err, s)
			}
		}
		return nil
	}
}

// migrate applies the migrations the database lacks, each in its own transaction that
// also sets user_version, so a crash leaves the database at some whole version.
func migrate(ctx context.Context, db *sql.DB, ms []migration) error {
	var v int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if v > len(ms) {
		return fmt.Errorf("schema version %d is newer than this build supports (%d); upgrade Lore", v, len(ms))
	}
	for i := v; i < len(ms); i++ {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migrate to %d: %w", i+1, err)
		}
		// Re-read inside the write lock: another process may have migrated meanwhile.
		var cur int
		if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&cur); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate to %d: %w", i+1, err)
		}
		if cur > i {
			tx.Rollback()
			i = cur - 1
			continue
		}
		if err := ms[i](ctx, tx); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate to %d: %w", i+1, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, i+1)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate to %d: %w", i+1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migrate to %d: %w", i+1, err)
		}
	}
	return nil
}

// SchemaVersion reports the database's schema version.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := db.r.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v)
	return v, err
}

var schemaV1 = []string{
	`CREATE TABLE workspaces (
		id         INTEGER PRIMARY KEY,
		name       TEXT NOT NULL UNIQUE,
		created    INTEGER NOT NULL,
		generation INTEGER NOT NULL DEFAULT 0
	)`,
	`CREATE TABLE folders (
		id           INTEGER PRIMARY KEY,
		workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
		path         TEXT NOT NULL,
		created      INTEGER NOT NULL,
		UNIQUE (workspace_id, path),
		UNIQUE (id, workspace_id)
	)`,
	// (folder_id, workspace_id) references folders so a document cannot sit in another
	// workspace's folder.
	`CREATE TABLE documents (
		id           INTEGER PRIMARY KEY,
		workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
		folder_id    INTEGER NOT NULL,
		path         TEXT NOT NULL,
		rel          TEXT NOT NULL,
		size         INTEGER NOT NULL,
		mtime        INTEGER NOT NULL,
		hash         TEXT NOT NULL DEFAULT '',
		parser       TEXT NOT NULL DEFAULT '',
		title        TEXT NOT NULL DEFAULT '',
		status       TEXT NOT NULL CHECK (status IN ('pending', 'indexed', 'error', 'skipped')),
		error        TEXT NOT NULL DEFAULT '',
		indexed_at   INTEGER NOT NULL DEFAULT 0,
		UNIQUE (workspace_id, path),
		FOREIGN KEY (folder_id, workspace_id) REFERENCES folders(id, workspace_id) ON DELETE CASCADE
	)`,
	`CREATE INDEX documents_folder ON documents(folder_id)`,
	`CREATE INDEX documents_hash ON documents(workspace_id, hash)`,
	`CREATE TABLE chunks (
		id          INTEGER PRIMARY KEY,
		document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
		ordinal     INTEGER NOT NULL,
		text        TEXT NOT NULL,
		tokens      INTEGER NOT NULL DEFAULT 0,
		page        INTEGER NOT NULL DEFAULT 0,
		heading     TEXT NOT NULL DEFAULT '',
		line_start  INTEGER NOT NULL DEFAULT 0,
		line_end    INTEGER NOT NULL DEFAULT 0,
		UNIQUE (document_id, ordinal)
	)`,
	// External-content FTS5 over chunks.text, kept in step by triggers, which also fire
	// for rows removed by ON DELETE CASCADE.
	`CREATE VIRTUAL TABLE chunks_fts USING fts5(
		text, content = 'chunks', content_rowid = 'id',
		tokenize = 'porter unicode61 remove_diacritics 2'
	)`,
	`CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
		INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text);
	END`,
	`CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
		INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
	END`,
	`CREATE TRIGGER chunks_au AFTER UPDATE OF text ON chunks BEGIN
		INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
		INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text);
	END`,
	`CREATE TABLE embeddings (
		chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
		model    TEXT NOT NULL,
		dim      INTEGER NOT NULL,
		vec      BLOB NOT NULL,
		PRIMARY KEY (chunk_id, model)
	)`,
	`CREATE TABLE settings (
		key     TEXT PRIMARY KEY,
		value   TEXT NOT NULL CHECK (json_valid(value)),
		updated INTEGER NOT NULL
	)`,
}

var schemaV2 = []string{
	`CREATE TABLE traces (
		id             INTEGER PRIMARY KEY,
		request_id     TEXT NOT NULL UNIQUE,
		workspace_id   INTEGER REFERENCES workspaces(id) ON DELETE CASCADE,
		created        INTEGER NOT NULL,
		ttft_ms        REAL NOT NULL DEFAULT 0,
		total_ms       REAL NOT NULL DEFAULT 0,
		fallback_level INTEGER NOT NULL DEFAULT 0,
		prompt_tokens  INTEGER NOT NULL DEFAULT 0,
		json           BLOB
	)`,
	`CREATE INDEX traces_workspace_created ON traces(workspace_id, created)`,
	`CREATE INDEX traces_created ON traces(created)`,
	`CREATE TABLE trace_stages (
		trace_id INTEGER NOT NULL REFERENCES traces(id) ON DELETE CASCADE,
		stage    TEXT NOT NULL,
		ms       REAL NOT NULL,
		PRIMARY KEY (trace_id, stage)
	)`,
}

var schemaV3 = []string{
	`CREATE TABLE chats (
		id           INTEGER PRIMARY KEY,
		workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
		title        TEXT NOT NULL DEFAULT '',
		created      INTEGER NOT NULL,
		updated      INTEGER NOT NULL
	)`,
	`CREATE INDEX chats_workspace ON chats(workspace_id, updated)`,
	`CREATE TABLE chat_messages (
		id         INTEGER PRIMARY KEY,
		chat_id    INTEGER NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
		role       TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
		content    TEXT NOT NULL,
		created    INTEGER NOT NULL,
		request_id TEXT NOT NULL DEFAULT ''
	)`,
	`CREATE INDEX chat_messages_chat ON chat_messages(chat_id, id)`,
}

// schemaV4 exposes the FTS index's per-term document counts, which RankBM25 uses to
// leave out words found in most chunks. An fts5vocab table stores nothing itself; it
// reads chunks_fts's index, and read-only connections cannot create it.
var schemaV4 = []string{
	`CREATE VIRTUAL TABLE chunks_fts_vocab USING fts5vocab(chunks_fts, row)`,
}

// schemaV5 stamps each embedding with the generation of its workspace that wrote it, so
// that the vector index can read only what changed since the generation it holds. Rows
// already there get their workspace's current generation: newer than any index built
// before them, never newer than the workspace.
var schemaV5 = []string{
	`ALTER TABLE embeddings ADD COLUMN generation INTEGER NOT NULL DEFAULT 0`,
	`UPDATE embeddings SET generation = (SELECT w.generation FROM chunks c
		JOIN documents d ON d.id = c.document_id
		JOIN workspaces w ON w.id = d.workspace_id
		WHERE c.id = embeddings.chunk_id)`,
	`CREATE INDEX embeddings_model_generation ON embeddings (model, generation)`,
}

// schemaV6 indexes each chunk's heading path beside its text: a section's title says
// what its chunks are about in the words a question uses, and a chunk that merely
// mentions a word ranked above the section about it. Measured with lore eval retrieval
// (eval/): MRR +0.03 on the Node.js docs, +0.01 on the Python sources. The index is
// rebuilt from the chunks once, inside the migration.
var schemaV6 = []string{
	`DROP TABLE chunks_fts_vocab`,
	`DROP TRIGGER chunks_ai`,
	`DROP TRIGGER chunks_ad`,
	`DROP TRIGGER chunks_au`,
	`DROP TABLE chunks_fts`,
	`CREATE VIRTUAL TABLE chunks_fts USING fts5(
		text, heading, content = 'chunks', content_rowid = 'id',
		tokenize = 'porter unicode61 remove_diacritics 2'
	)`,
	`INSERT INTO chunks_fts(chunks_fts) VALUES ('rebuild')`,
	`CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
		INSERT INTO chunks_fts(rowid, text, heading) VALUES (new.id, new.text, new.heading);
	END`,
	`CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
		INSERT INTO chunks_fts(chunks_fts, rowid, text, heading) VALUES ('delete', old.id, old.text, old.heading);
	END`,
	`CREATE TRIGGER chunks_au AFTER UPDATE OF text, heading ON chunks BEGIN
		INSERT INTO chunks_fts(chunks_fts, rowid, text, heading) VALUES ('delete', old.id, old.text, old.heading);
		INSERT INTO chunks_fts(rowid, text, heading) VALUES (new.id, new.text, new.heading);
	END`,
	`CREATE VIRTUAL TABLE chunks_fts_vocab USING fts5vocab(chunks_fts, row)`,
}

// schemaV7 marks the documents parsed as plain text pending, so that the next indexing
// run parses them again: a manual page rendered to text now gets its NAME line as the
// heading of its chunks (index/parse manName). Their chunks stay searchable meanwhile.
var schemaV7 = []string{
	`UPDATE documents SET status = 'pending' WHERE parser = 'text' AND status = 'indexed'`,
}

// schemaV8 keeps a turn's citations with its messages and indexes the chats' text.
// A question keeps the passages its turn placed in the prompt, as they were sent
// (passages: JSON), so that a follow-up lays that turn out again without reading
// traces back; an answer keeps the sources it was shown with (sources: JSON) and
// whether it was stopped. Both are ” for the turns stored before. chat_messages_fts
// lets chat search find a word said in a turn, not only in a chat's title; it is
// filled from the messages already stored.
var schemaV8 = []string{
	`ALTER TABLE chat_messages ADD COLUMN passages TEXT NOT NULL DEFAULT ''`,
	`ALTER TABLE chat_messages ADD COLUMN sources TEXT NOT NULL DEFAULT ''`,
	`ALTER TABLE chat_messages ADD COLUMN stopped INTEGER NOT NULL DEFAULT 0`,
	`CREATE VIRTUAL TABLE chat_messages_fts USING fts5(
		content, content = 'chat_messages', content_rowid = 'id',
		tokenize = 'porter unicode61 remove_diacritics 2'
	)`,
	`INSERT INTO chat_messages_fts(chat_messages_fts) VALUES ('rebuild')`,
	`CREATE TRIGGER chat_messages_ai AFTER INSERT ON chat_messages BEGIN
		INSERT INTO chat_messages_fts(rowid, content) VALUES (new.id, new.content);
	END`,
	`CREATE TRIGGER chat_messages_ad AFTER DELETE ON chat_messages BEGIN
		INSERT INTO chat_messages_fts(chat_messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
	END`,
	`CREATE TRIGGER chat_messages_au AFTER UPDATE OF content ON chat_messages BEGIN
		INSERT INTO chat_messages_fts(chat_messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
		INSERT INTO chat_messages_fts(rowid, content) VALUES (new.id, new.content);
	END`,
}
