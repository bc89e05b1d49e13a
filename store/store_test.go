package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func openTest(t *testing.T) *DB {
	t.Helper()
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "lore.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// fixture is a workspace with one folder.
type fixture struct {
	db *DB
	ws Workspace
	f  Folder
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	db := openTest(t)
	ctx := context.Background()
	ws, err := db.EnsureWorkspace(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	f, err := db.AddFolder(ctx, ws.ID, "/data/notes")
	if err != nil {
		t.Fatal(err)
	}
	return fixture{db, ws, f}
}

func (fx fixture) doc(rel string) Document {
	return Document{WorkspaceID: fx.ws.ID, FolderID: fx.f.ID, Path: "/data/notes/" + rel, Rel: rel,
		Size: 10, ModTime: time.Unix(1700000000, 123456789), Hash: "h-" + rel, Parser: "text"}
}

// put stores a document with one chunk per text and returns its id.
func (fx fixture) put(t *testing.T, rel string, texts ...string) int64 {
	t.Helper()
	ctx := context.Background()
	var cs []Chunk
	for i, s := range texts {
		cs = append(cs, Chunk{Ordinal: i, Text: s, Tokens: len(strings.Fields(s)), LineStart: i + 1, LineEnd: i + 1})
	}
	if err := fx.db.ReplaceDocument(ctx, fx.doc(rel), cs); err != nil {
		t.Fatal(err)
	}
	d, err := fx.db.DocumentByPath(ctx, fx.ws.ID, "/data/notes/"+rel)
	if err != nil {
		t.Fatal(err)
	}
	return d.ID
}

func (fx fixture) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := fx.db.r.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func (fx fixture) check(t *testing.T) {
	t.Helper()
	if err := fx.db.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestOpenSettings(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	for _, tc := range []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"synchronous", "1"}, // NORMAL
		{"user_version", fmt.Sprint(len(migrations))},
	} {
		for name, pool := range map[string]*sql.DB{"write": db.w, "read": db.r} {
			var got string
			if err := pool.QueryRowContext(ctx, "PRAGMA "+tc.pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("%s pool: PRAGMA %s = %q, want %q", name, tc.pragma, got, tc.want)
			}
		}
	}
	if _, err := db.r.ExecContext(ctx, `INSERT INTO settings VALUES ('x', '1', 0)`); err == nil {
		t.Error("read pool accepted a write")
	}
	if err := db.Check(ctx); err != nil {
		t.Error(err)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, ""); err == nil {
		t.Error("empty path: no error")
	}
	// A path with URI-special characters must still name a plain file.
	odd := filepath.Join(t.TempDir(), "a dir?x=1#frag", "lore%20.db")
	db, err := Open(ctx, odd)
	if err != nil {
		t.Fatal(err)
	}
	if db.Path() != odd {
		t.Errorf("Path() = %q, want %q", db.Path(), odd)
	}
	db.Close()

	// A file that is not a database is refused and left as it was.
	junk := filepath.Join(t.TempDir(), "junk.db")
	content := []byte(strings.Repeat("not a database\n", 500))
	if err := os.WriteFile(junk, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if db, err := Open(ctx, junk); err == nil {
		db.Close()
		t.Error("Open(junk file): no error")
	}
	if got, _ := os.ReadFile(junk); !bytes.Equal(got, content) {
		t.Error("Open(junk file) modified it")
	}

	// A database from a newer build is refused, not downgraded.
	path := filepath.Join(t.TempDir(), "new.db")
	raw, err := sql.Open("sqlite3", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if _, err := Open(ctx, path); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("Open(newer schema) = %v, want a 'newer' error", err)
	}
}

func TestMigrateFromV1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	raw, err := sql.Open("sqlite3", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, raw, migrations[:1]); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		`INSERT INTO workspaces (id, name, created, generation) VALUES (1, 'old', 1, 7)`,
		`INSERT INTO folders (id, workspace_id, path, created) VALUES (1, 1, '/old', 1)`,
		`INSERT INTO documents (id, workspace_id, folder_id, path, rel, size, mtime, status) VALUES (1, 1, 1, '/old/a.txt', 'a.txt', 5, 7, 'indexed')`,
		`INSERT INTO chunks (document_id, ordinal, text, heading) VALUES (1, 0, 'zebras migrate across the plains', 'Savanna > Herds')`,
		`INSERT INTO embeddings (chunk_id, model, dim, vec) VALUES (1, 'm', 1, x'0000803f')`,
	} {
		if _, err := raw.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	var v int
	raw.QueryRow(`PRAGMA user_version`).Scan(&v)
	if v != 1 {
		t.Fatalf("fixture at version %d, want 1", v)
	}
	if _, err := raw.Exec(`SELECT 1 FROM traces`); err == nil {
		t.Fatal("version 1 already has traces")
	}
	raw.Close()

	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, _ := db.SchemaVersion(ctx); v != len(migrations) {
		t.Errorf("schema version %d after upgrade, want %d", v, len(migrations))
	}
	hits, err := db.SearchBM25(ctx, 1, "migrating zebra", 5)
	if err != nil || len(hits) != 1 || hits[0].Path != "/old/a.txt" {
		t.Errorf("search after upgrade = %v, %v", hits, err)
	}
	// Headings indexed from version 6 on, the old chunk's too (the index is rebuilt).
	if hits, err := db.SearchBM25(ctx, 1, "savanna herd", 5); err != nil || len(hits) != 1 {
		t.Errorf("search by heading after upgrade = %v, %v", hits, err)
	}
	if err := db.Check(ctx); err != nil {
		t.Errorf("check after upgrade: %v", err)
	}
	// The old vector is stamped with its workspace's generation: new to an index older
	// than that, not to one built at it.
	for since, want := range map[int64]int{6: 1, 7: 0} {
		n := 0
		if err := db.Vectors(ctx, 1, "m", since, func(int64, []float32) error { n++; return nil }); err != nil || n != want {
			t.Errorf("Vectors since %d after upgrade: %d, %v; want %d", since, n, err, want)
		}
	}
	if err := db.PutTrace(ctx, TraceRecord{RequestID: "r1", WorkspaceID: 1, TotalMs: 5}); err != nil {
		t.Error(err)
	}
	if _, err := db.NewChat(ctx, 1, "hello"); err != nil {
		t.Error(err)
	}
	if err := db.Check(ctx); err != nil {
		t.Error(err)
	}
	db.Close()
	// Opening again is a no-op.
	db2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	db2.Close()
}

func TestWorkspacesAndFolders(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	db := fx.db
	again, err := db.EnsureWorkspace(ctx, "  main ")
	if err != nil || again.ID != fx.ws.ID {
		t.Errorf("EnsureWorkspace again = %+v, %v; want id %d", again, err, fx.ws.ID)
	}
	if _, err := db.EnsureWorkspace(ctx, " "); err == nil {
		t.Error("blank workspace name accepted")
	}
	other, _ := db.EnsureWorkspace(ctx, "other")
	wss, err := db.Workspaces(ctx)
	if err != nil || len(wss) != 2 || wss[0].Name != "main" || wss[1].Name != "other" {
		t.Errorf("Workspaces = %+v, %v", wss, err)
	}
	if _, err := db.AddFolder(ctx, fx.ws.ID, "relative/path"); err == nil {
		t.Error("relative folder accepted")
	}
	f2, err := db.AddFolder(ctx, fx.ws.ID, "/data/notes/")
	if err != nil || f2.ID != fx.f.ID {
		t.Errorf("AddFolder again = %+v, %v; want id %d", f2, err, fx.f.ID)
	}
	fs, err := db.Folders(ctx, fx.ws.ID)
	if err != nil || len(fs) != 1 || fs[0].Path != "/data/notes" {
		t.Errorf("Folders = %+v, %v", fs, err)
	}
	// A document cannot be put in another workspace's folder.
	d := fx.doc("x.txt")
	d.WorkspaceID = other.ID
	if err := db.ReplaceDocument(ctx, d, []Chunk{{Text: "x"}}); err == nil {
		t.Error("document stored in another workspace's folder")
	}
	if n := fx.count(t, `SELECT count(*) FROM chunks`); n != 0 {
		t.Errorf("%d chunks left by a failed ReplaceDocument", n)
	}

	fx.put(t, "a.txt", "alpha one", "alpha two")
	if err := db.RemoveFolder(ctx, fx.ws.ID, "/data/notes"); err != nil {
		t.Fatal(err)
	}
	if n := fx.count(t, `SELECT count(*) FROM documents`); n != 0 {
		t.Errorf("RemoveFolder left %d documents", n)
	}
	if err := db.RemoveFolder(ctx, fx.ws.ID, "/data/notes"); !errors.Is(err, ErrNotFound) {
		t.Errorf("RemoveFolder twice = %v, want ErrNotFound", err)
	}
	fx.check(t)
}

func TestSettings(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	type cfg struct {
		Model string `json:"model"`
		TopK  int    `json:"top_k"`
	}
	var got cfg
	if ok, err := db.Setting(ctx, "retrieval", &got); ok || err != nil {
		t.Errorf("unset setting: ok=%v err=%v", ok, err)
	}
	for _, want := range []cfg{{"a", 5}, {"b", 8}} {
		if err := db.PutSetting(ctx, "retrieval", want); err != nil {
			t.Fatal(err)
		}
		if ok, err := db.Setting(ctx, "retrieval", &got); !ok || err != nil || got != want {
			t.Errorf("Setting = %+v (ok=%v, %v), want %+v", got, ok, err, want)
		}
	}
	var wrong int
	if _, err := db.Setting(ctx, "retrieval", &wrong); err == nil {
		t.Error("decoding an object into an int: no error")
	}
	if err := db.PutSetting(ctx, "", 1); err == nil {
		t.Error("empty key accepted")
	}
}

func TestChats(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	db := fx.db
	c1, err := db.NewChat(ctx, fx.ws.ID, "first")
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := db.NewChat(ctx, fx.ws.ID, "second")
	for i, role := range []string{"user", "assistant", "user"} {
		if _, err := db.AppendMessage(ctx, Message{ChatID: c1.ID, Role: role, Content: fmt.Sprint("m", i), RequestID: "req"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.AppendMessage(ctx, Message{ChatID: c1.ID, Role: "robot", Content: "x"}); err == nil {
		t.Error("invalid role accepted")
	}
	if _, err := db.AppendMessage(ctx, Message{ChatID: 999, Role: "user", Content: "x"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("message to missing chat: %v, want ErrNotFound", err)
	}
	ms, err := db.Messages(ctx, c1.ID)
	if err != nil || len(ms) != 3 || ms[1].Role != "assistant" || ms[2].Content != "m2" || ms[0].RequestID != "req" {
		t.Errorf("Messages = %+v, %v", ms, err)
	}
	chats, err := db.Chats(ctx, fx.ws.ID)
	if err != nil || len(chats) != 2 || chats[0].ID != c1.ID {
		t.Errorf("Chats = %+v, %v; want %d (most recent) first", chats, err, c1.ID)
	}
	// Each with its number of questions and the latest: chats that start alike told apart.
	if err == nil && len(chats) == 2 && (chats[0].Questions != 2 || chats[0].Last != "m2" || chats[1].Questions != 0 || chats[1].Last != "") {
		t.Errorf("Chats = %+v; want 2 questions, the last m2, then none", chats)
	}
	if err := db.DeleteChat(ctx, c2.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteWorkspace(ctx, fx.ws.ID); err != nil {
		t.Fatal(err)
	}
	if n := fx.count(t, `SELECT count(*) FROM chat_messages`); n != 0 {
		t.Errorf("%d messages left after deleting the workspace", n)
	}
}

// TestFileModes: the database and its -wal and -shm files are readable by
// the user alone, whatever the umask, and ones left wider are tightened.
func TestFileModes(t *testing.T) {
	ctx := context.Background()
	for _, pre := range []os.FileMode{0, 0o644, 0o666} {
		t.Run(fmt.Sprintf("existing %v", pre), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			path := filepath.Join(dir, "lore.db")
			if pre != 0 {
				db, err := Open(ctx, path)
				if err != nil {
					t.Fatal(err)
				}
				db.Close()
				os.Chmod(path, pre)
			}
			db, err := Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.PutSetting(ctx, "k", 1); err != nil { // a write: -wal and -shm exist now
				t.Fatal(err)
			}
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				st, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if m := st.Mode().Perm(); m != 0o600 {
					t.Errorf("%s: %v, want 0600", filepath.Base(p), m)
				}
			}
			if st, _ := os.Stat(dir); st.Mode().Perm()&0o077 != 0 {
				t.Errorf("folder created %v", st.Mode().Perm())
			}
		})
	}
}

// TestMigrateV7 checks that upgrading to version 7 sends plain-text documents, and only
// those, back to be parsed again, keeping their chunks searchable.
func TestMigrateV7(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v6.db")
	raw, err := sql.Open("sqlite3", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, raw, migrations[:6]); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		`INSERT INTO workspaces (id, name, created, generation) VALUES (1, 'old', 1, 7)`,
		`INSERT INTO folders (id, workspace_id, path, created) VALUES (1, 1, '/old', 1)`,
		`INSERT INTO documents (id, workspace_id, folder_id, path, rel, size, mtime, parser, status) VALUES
			(1, 1, 1, '/old/ls.1.txt', 'ls.1.txt', 5, 7, 'text', 'indexed'),
			(2, 1, 1, '/old/a.md', 'a.md', 5, 7, 'markdown', 'indexed'),
			(3, 1, 1, '/old/b.txt', 'b.txt', 5, 7, 'text', 'error'),
			(4, 1, 1, '/old/c.go', 'c.go', 5, 7, 'code', 'indexed')`,
		`INSERT INTO chunks (document_id, ordinal, text) VALUES (1, 0, 'list directory contents')`,
	} {
		if _, err := raw.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for id, want := range map[int]string{1: "pending", 2: "indexed", 3: "error", 4: "indexed"} {
		var got string
		if err := db.r.QueryRow(`SELECT status FROM documents WHERE id = ?`, id).Scan(&got); err != nil || got != want {
			t.Errorf("document %d: status %q (%v), want %q", id, got, err, want)
		}
	}
	if hits, err := db.SearchBM25(ctx, 1, "directory", 5); err != nil || len(hits) != 1 {
		t.Errorf("search after upgrade = %v, %v", hits, err)
	}
}

// TestMigrateV8 checks that upgrading to version 8 keeps the chats stored before: their
// turns read back with no passages or sources and are found by chat search.
func TestMigrateV8(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v7.db")
	raw, err := sql.Open("sqlite3", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, raw, migrations[:7]); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		`INSERT INTO workspaces (id, name, created, generation) VALUES (1, 'old', 1, 7)`,
		`INSERT INTO chats (id, workspace_id, title, created, updated) VALUES (1, 1, 'expenses', 1, 2)`,
		`INSERT INTO chat_messages (chat_id, role, content, created, request_id) VALUES
			(1, 'user', 'and the hotel limit?', 1, 'r1'),
			(1, 'assistant', 'Up to 150 EUR [stopped]', 2, 'r1')`,
	} {
		if _, err := raw.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms, err := db.Messages(ctx, 1)
	if err != nil || len(ms) != 2 || ms[0].Passages != nil || ms[1].Sources != nil || ms[1].Stopped {
		t.Errorf("messages after upgrade = %+v, %v", ms, err)
	}
	if got, err := db.SearchChats(ctx, 1, "hotel"); err != nil || len(got) != 1 || got[0].ID != 1 {
		t.Errorf("chat search after upgrade = %+v, %v", got, err)
	}
	if err := db.Check(ctx); err != nil {
		t.Error(err)
	}
}
