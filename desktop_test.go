package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lore/app"
	"lore/index/parse"
)

// These tests drive the bound methods the way the page does, with the Wails
// runtime replaced by recorders: no GTK, no WebKit, no models (answers are
// extractive).

// The test binary doubles as the parse worker; models run in the
// lore-runner-<variant> programs that `make test` builds (LORE_RUNNER_DIR).
func TestMain(m *testing.M) {
	parse.MaybeServeWorker(os.Args) // a parse worker child process serves and exits here
	os.Exit(m.Run())
}

type recorder struct {
	mu     sync.Mutex
	events map[string][]event
	picked string
	opened []string
}

func (r *recorder) emit(name string, data any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events[name] = append(r.events[name], data.(event))
}

func (r *recorder) get(name string) []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events[name]...)
}

func (r *recorder) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for n := range r.events {
		out = append(out, n)
	}
	return out
}

// waitFor polls until the channel's last event has type typ.
func (r *recorder) waitFor(t *testing.T, name, typ string) []event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ev := r.get(name)
		if n := len(ev); n > 0 && ev[n-1].Type == typ {
			return ev
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %q event on %s; got %v", typ, name, r.get(name))
	return nil
}

func newTestDesktop(t *testing.T) (*App, *recorder, string) {
	t.Helper()
	core, err := app.New(context.Background(), app.Config{DataDir: t.TempDir(), WorkerCmd: []string{os.Args[0], "parse-worker"}})
	if err != nil {
		t.Fatal(err)
	}
	d := newDesktop(core)
	rec := &recorder{events: map[string][]event{}}
	t.Cleanup(func() {
		d.shutdown(context.Background())
		core.Close()
	})
	lib := t.TempDir()
	files := map[string]string{
		"river.md":  "# The river\n\nThe river market opens at dawn. Boats bring fish and grain from the north.\n",
		"garden.md": "# Garden\n\nThe small garden behind the library grows tomatoes, beans and an apple tree.\n",
		"run.sh":    "#!/bin/sh\n# deploy script: copies the harbour timetable to the server\necho harbour timetable\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(lib, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d, rec, lib
}

func (d *App) bindTest(rec *recorder) {
	d.bind(context.Background(), rec.emit,
		func(string) (string, error) { return rec.picked, nil },
		func(path string, reveal bool) error {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if reveal {
				path = "reveal:" + path
			}
			rec.opened = append(rec.opened, path)
			return nil
		})
}

func wantInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted", what)
	} else if !errors.Is(err, app.ErrInvalid) && !errors.Is(err, app.ErrNotFound) {
		t.Errorf("%s: %v (want an invalid/not found error)", what, err)
	}
}

func TestNotReadyBeforeStartup(t *testing.T) {
	d, _, _ := newTestDesktop(t)
	if _, err := d.Workspaces(); !errors.Is(err, errNotReady) {
		t.Fatalf("Workspaces before startup: %v", err)
	}
	if _, err := d.Ask(AskArgs{Question: "q", Workspace: "default"}); !errors.Is(err, errNotReady) {
		t.Fatalf("Ask before startup: %v", err)
	}
}

func TestLibraryAskAndHistory(t *testing.T) {
	d, rec, lib := newTestDesktop(t)
	d.bindTest(rec)
	wss, err := d.Workspaces()
	if err != nil || len(wss) != 1 || wss[0].Name != "default" {
		t.Fatalf("Workspaces: %v %v", wss, err)
	}
	if _, err := d.CreateWorkspace("notes"); err != nil {
		t.Fatal(err)
	}

	// Adding a folder: the path comes from the (stubbed) native picker only.
	rec.picked = ""
	if p, err := d.AddFolder("notes"); p != "" || err != nil {
		t.Fatalf("cancelled picker: %q %v", p, err)
	}
	rec.picked = lib
	if p, err := d.AddFolder("notes"); p != lib || err != nil {
		t.Fatalf("AddFolder: %q %v", p, err)
	}
	ev := rec.waitFor(t, "progress:notes", "done")
	if len(ev) < 2 || ev[0].Type != "progress" {
		t.Errorf("progress events: %+v", ev)
	}
	if p, ok := ev[0].Data.(app.Progress); !ok || p.Phase == "" {
		t.Errorf("first progress event carries %#v", ev[0].Data)
	}
	docs, err := d.Documents("notes")
	if err != nil || len(docs) != 3 {
		t.Fatalf("Documents: %v %v", docs, err)
	}

	// Prefetch reaches the app (this app has no chat model to read ahead
	// into: app's tests cover the reading, the browser e2e the page).
	if res, err := d.Prefetch(app.PrefetchRequest{Draft: "When does the river market open?", Workspace: "notes"}); err != nil || res.Started || res.Reason != "no generation model" {
		t.Fatalf("Prefetch: %+v %v", res, err)
	}
	if st, err := d.PrefetchStatus(); err != nil || st.State != app.ReadAheadNone {
		t.Fatalf("PrefetchStatus: %+v %v", st, err)
	}
	// The read-ahead status is pushed on the prefetch channel from startup.
	if ev := rec.waitFor(t, "prefetch", "status"); ev[0].Data.(app.PrefetchStatus).State != app.ReadAheadNone {
		t.Errorf("prefetch events: %+v", ev)
	}

	// Ask: events on ask:<client_id> only, trace first, sources before the
	// first token, done last.
	const cid = "0b0e7a6c-1111-4c2e-9d1e-aaaaaaaaaaaa"
	id, err := d.Ask(AskArgs{Question: "When does the river market open?", Workspace: "notes", ClientID: cid})
	if err != nil || len(id) != 16 || id == cid {
		t.Fatalf("Ask: %q %v", id, err)
	}
	ev = rec.waitFor(t, "ask:"+cid, "done")
	if ev[0].Type != "trace" {
		t.Errorf("first event %q", ev[0].Type)
	}
	order := map[string]int{}
	for i, e := range ev {
		if _, seen := order[e.Type]; !seen {
			order[e.Type] = i
		}
	}
	if order["sources"] == 0 || order["token"] == 0 || order["sources"] > order["token"] {
		t.Errorf("event order %v", order)
	}
	for _, n := range rec.names() {
		if strings.HasPrefix(n, "ask:") && n != "ask:"+cid {
			t.Errorf("event on %s", n)
		}
	}
	srcs, _ := ev[order["sources"]].Data.(app.Sources)
	if len(srcs) == 0 || !strings.Contains(srcs[0].Document, "river") {
		t.Fatalf("sources %+v", srcs)
	}
	if err := d.ReportUI(id, 120.5, 3); err != nil {
		t.Fatal(err)
	}
	tr, err := d.Trace(id)
	if err != nil || tr.Stages["ui_ttft_ms"] != 120.5 {
		t.Fatalf("trace after ReportUI: %v %v", tr, err)
	}

	chats, err := d.Chats("notes")
	if err != nil || len(chats) != 1 {
		t.Fatalf("Chats: %v %v", chats, err)
	}
	chat, err := d.Chat(chats[0].ID)
	if err != nil || len(chat.Messages) != 2 {
		t.Fatalf("Chat: %+v %v", chat, err)
	}
	// The same chat goes on; a chat of another workspace is refused.
	if _, err := d.Ask(AskArgs{Question: "And the garden?", Workspace: "notes", ChatID: chats[0].ID, ClientID: "second-0000"}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "ask:second-0000", "done")
	wantInvalid(t, "chat of another workspace", ignore(d.Ask(AskArgs{Question: "x", Workspace: "default", ChatID: chats[0].ID})))

	// Open file: only through a chunk id; documents open, scripts are shown in their folder.
	res, err := d.core.Search(context.Background(), "notes", "harbour timetable deploy", app.SearchOptions{TopK: 10})
	if err != nil {
		t.Fatal(err)
	}
	var md, sh int64
	for _, p := range res.Passages {
		switch filepath.Ext(p.Path) {
		case ".md":
			md = p.ChunkID
		case ".sh":
			sh = p.ChunkID
		}
	}
	if sh == 0 {
		t.Fatalf("no chunk of run.sh among %+v", res.Passages)
	}
	if md == 0 {
		res, _ = d.core.Search(context.Background(), "notes", "garden tomatoes", app.SearchOptions{TopK: 10})
		md = res.Passages[0].ChunkID
	}
	if err := d.OpenSource(md); err != nil {
		t.Fatal(err)
	}
	if err := d.OpenSource(sh); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	opened := rec.opened
	rec.mu.Unlock()
	if len(opened) != 2 || !strings.HasPrefix(opened[0], lib) || opened[1] != "reveal:"+filepath.Join(lib, "run.sh") {
		t.Errorf("opened %q", opened)
	}
	wantInvalid(t, "OpenSource(0)", d.OpenSource(0))
	if err := d.OpenSource(1 << 40); err == nil {
		t.Error("OpenSource of a missing chunk accepted")
	}

	// Removing: only one of the workspace's folders.
	wantInvalid(t, "RemoveFolder outside", d.RemoveFolder("notes", "/etc"))
	wantInvalid(t, "RemoveFolder other workspace", d.RemoveFolder("default", lib))
	if err := d.RemoveFolder("notes", lib); err != nil {
		t.Fatal(err)
	}
	if docs, _ := d.Documents("notes"); len(docs) != 0 {
		t.Errorf("documents after removing the folder: %v", docs)
	}
}

func ignore[T any](_ T, err error) error { return err }

func TestArgumentsAreValidated(t *testing.T) {
	d, rec, _ := newTestDesktop(t)
	d.bindTest(rec)
	long := strings.Repeat("a", app.MaxQuestion+1)
	for name, req := range map[string]AskArgs{
		"empty question":     {Question: "  ", Workspace: "default"},
		"long question":      {Question: long, Workspace: "default"},
		"invalid UTF-8":      {Question: "\xff\xfe", Workspace: "default"},
		"unknown workspace":  {Question: "q", Workspace: "nope"},
		"negative chat":      {Question: "q", Workspace: "default", ChatID: -1},
		"missing chat":       {Question: "q", Workspace: "default", ChatID: 99},
		"client id injected": {Question: "q", Workspace: "default", ClientID: "x'); alert(1); ('"},
		"client id short":    {Question: "q", Workspace: "default", ClientID: "ab"},
	} {
		wantInvalid(t, "Ask "+name, ignore(d.Ask(req)))
	}
	if wss, _ := d.core.Workspaces(context.Background()); len(wss) > 1 || len(wss) == 1 && wss[0].Name != "default" {
		t.Errorf("a call other than CreateWorkspace created a workspace: %v", wss)
	}
	wantInvalid(t, "Documents of an unknown workspace", ignore(d.Documents("nope")))
	wantInvalid(t, "Chats of an unknown workspace", ignore(d.Chats("nope")))
	wantInvalid(t, "Reindex of an unknown workspace", d.Reindex("nope"))
	wantInvalid(t, "AddFolder to an unknown workspace", ignore(d.AddFolder("nope")))
	wantInvalid(t, "CreateWorkspace with a slash", ignore(d.CreateWorkspace("a/b")))
	wantInvalid(t, "CreateWorkspace with a newline", ignore(d.CreateWorkspace("a\nb")))
	wantInvalid(t, "CreateWorkspace with a bang", ignore(d.CreateWorkspace("My Notes!")))
	wantInvalid(t, "RenameWorkspace of the default", ignore(d.RenameWorkspace("default", "main")))
	wantInvalid(t, "RenameWorkspace of an unknown workspace", ignore(d.RenameWorkspace("nope", "main")))
	wantInvalid(t, "DeleteWorkspace of the default", d.DeleteWorkspace("default"))
	wantInvalid(t, "DeleteWorkspace of an unknown workspace", d.DeleteWorkspace("nope"))
	wantInvalid(t, "SearchChats of an unknown workspace", ignore(d.SearchChats("nope", "x")))
	if _, err := d.CreateWorkspace("default"); !errors.Is(err, app.ErrExists) {
		t.Errorf("CreateWorkspace(default) again: %v, want ErrExists", err)
	}
	wantInvalid(t, "Chat(0)", ignore(d.Chat(0)))
	wantInvalid(t, "Chunk(-1)", ignore(d.Chunk(-1)))
	wantInvalid(t, "Traces(0)", ignore(d.Traces(0)))
	wantInvalid(t, "Traces(10000)", ignore(d.Traces(10000)))
	wantInvalid(t, "Trace(path)", ignore(d.Trace("../../etc")))
	wantInvalid(t, "TraceStats(bad)", ignore(d.TraceStats("1h; x")))
	wantInvalid(t, "Cancel(unknown)", d.Cancel("abcdef0123456789"))
	wantInvalid(t, "Cancel(bad)", d.Cancel("a b"))
	wantInvalid(t, "ReportUI(NaN-ish)", d.ReportUI("abcdef0123456789", -1, 0))
	wantInvalid(t, "ReportUI(paint > ttft)", d.ReportUI("abcdef0123456789", 10, 20))
	if _, err := d.TraceStats("24h"); err != nil {
		t.Errorf("TraceStats(24h): %v", err)
	}

	// Settings: merged like PUT /api/settings; models only from the discovered list.
	before, _ := d.Settings()
	s, err := d.SaveSettings(json.RawMessage(`{"top_k": 9}`))
	if err != nil || s.TopK != 9 || s.MaxTokens != before.MaxTokens {
		t.Fatalf("SaveSettings merge: %+v %v", s, err)
	}
	wantInvalid(t, "unknown setting", ignore(d.SaveSettings(json.RawMessage(`{"top_k": 9, "shell": "rm"}`))))
	wantInvalid(t, "model outside the list", ignore(d.SaveSettings(json.RawMessage(`{"chat_model": "/etc/passwd"}`))))
	if _, err := d.SaveSettings(json.RawMessage(`{"top_k": 0}`)); err == nil {
		t.Error("top_k 0 accepted")
	}
	if s, _ := d.Settings(); s.TopK != 9 || s.ChatModel != "" {
		t.Errorf("settings changed by refused calls: %+v", s)
	}
}

func TestOpenable(t *testing.T) {
	for path, want := range map[string]bool{
		"/a/notes.md": true, "/a/r.PDF": true, "/a/x.txt": true,
		"/a/run.sh": false, "/a/x.exe": false, "/a/x.bat": false, "/a/x.js": false, "/a/x.desktop": false,
		"/a/x.lnk": false, "/a/Makefile": false, "/a/x.app": false, "/a/x.command": false,
	} {
		if openable(path) != want {
			t.Errorf("openable(%s) = %v", path, !want)
		}
	}
}
