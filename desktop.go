package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	wruntime "github.com/wailsapp/wails/v2/pkg/runtime"

	"lore/app"
	"lore/store"
)

// App is the Go surface the desktop UI calls: window.go.main.App.<Method>
// (frontend/src/transport/wails.ts). Wails lets every script in the page
// call every exported method, so each one validates its arguments, and none
// takes a filesystem path to open or read: folders come from the native
// picker, files to open from a chunk id checked against the workspace.
//
// Only the methods below are exported; everything else is unexported on
// purpose (an exported method is a new binding).
type App struct {
	core *app.App

	// Hooks into the Wails runtime, set by startup; tests replace them.
	emit       func(name string, data any)
	pickFolder func(title string) (string, error)
	openPath   func(path string, reveal bool) error

	ctx    context.Context // the Wails context; nil until startup
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	inflight  map[string]*askRun // by request id
	clients   map[string]string  // client id → request id, while in flight
	following map[string]bool    // workspaces whose progress is forwarded
	picking   bool               // a folder picker is open
}

// askRun is one answer being generated.
type askRun struct {
	cancel context.CancelFunc
	// ui holds the UI's TTFT report when it arrives before the trace is
	// stored (it usually does: the first token is painted long before the
	// last one is generated); it is applied once the answer ends.
	ui *[2]float64
}

// Limits on what the page may ask for.
const (
	maxInflight    = 4
	maxQuestion    = 8000
	maxNameLen     = 64
	progressPeriod = 100 * time.Millisecond
)

var (
	errNotReady    = errors.New("the desktop app is still starting")
	clientIDRe     = regexp.MustCompile(`^[A-Za-z0-9-]{8,64}$`)
	requestIDRe    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	statsWindowRe  = regexp.MustCompile(`^(all|[0-9]{1,5}(ms|s|m|h|d))$`)
	openableSuffix = []string{".md", ".markdown", ".mdown", ".mkd", ".txt", ".text", ".pdf", ".docx", ".html", ".htm", ".rst", ".org", ".csv", ".json", ".log"}
)

func newDesktop(core *app.App) *App {
	return &App{core: core, inflight: map[string]*askRun{}, clients: map[string]string{}, following: map[string]bool{}}
}

// startup runs when the window exists (Wails OnStartup).
func (d *App) startup(ctx context.Context) {
	d.bind(ctx,
		func(name string, data any) { wruntime.EventsEmit(ctx, name, data) },
		func(title string) (string, error) {
			return wruntime.OpenDirectoryDialog(ctx, wruntime.OpenDialogOptions{Title: title, CanCreateDirectories: false})
		},
		openWithOS)
}

// bind sets the context and the runtime hooks and starts forwarding the
// indexing progress of the existing workspaces.
func (d *App) bind(ctx context.Context, emit func(string, any), pick func(string) (string, error), open func(string, bool) error) {
	ctx, cancel := context.WithCancel(ctx)
	d.mu.Lock()
	d.ctx, d.cancel, d.emit, d.pickFolder, d.openPath = ctx, cancel, emit, pick, open
	d.mu.Unlock()
	if wss, err := d.core.DB().Workspaces(ctx); err == nil {
		for _, w := range wss {
			d.follow(w.Name)
		}
	}
}

// shutdown stops the answers and progress forwarders (Wails OnShutdown).
func (d *App) shutdown(context.Context) {
	d.mu.Lock()
	cancel := d.cancel
	d.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	d.wg.Wait()
}

func (d *App) ready() (context.Context, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx == nil {
		return nil, errNotReady
	}
	return d.ctx, nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", app.ErrInvalid, fmt.Sprintf(format, args...))
}

// workspace checks that name is an existing workspace: no call from the
// page creates one except CreateWorkspace.
func (d *App) workspace(ctx context.Context, name string) (string, error) {
	if name == "" || len(name) > maxNameLen || !utf8.ValidString(name) {
		return "", invalid("workspace name must be 1–%d characters", maxNameLen)
	}
	wss, err := d.core.DB().Workspaces(ctx)
	if err != nil {
		return "", err
	}
	for _, w := range wss {
		if w.Name == name {
			return name, nil
		}
	}
	return "", fmt.Errorf("workspace %q: %w", name, app.ErrNotFound)
}

// AskArgs is a question from the UI. ClientID names the event channel
// (ask:<client_id>) the page subscribed to before calling Ask, so no event
// is emitted before anyone listens.
type AskArgs struct {
	Question  string `json:"question"`
	Workspace string `json:"workspace"`
	ChatID    int64  `json:"chat_id,omitempty"`
	ClientID  string `json:"client_id"`
}

// askEvent is the payload of an ask:<id> event.
type askEvent struct {
	Type string `json:"type"`
	Data any    `json:"data"`
}

// Ask starts answering and returns the request id at once; the answer
// streams as ask:<client_id> events {type, data}: trace, stage, sources,
// token, done or error (as the HTTP API's event stream).
func (d *App) Ask(req AskArgs) (string, error) {
	received := time.Now()
	ctx, err := d.ready()
	if err != nil {
		return "", err
	}
	q := strings.TrimSpace(req.Question)
	switch {
	case q == "":
		return "", invalid("empty question")
	case len(q) > maxQuestion || !utf8.ValidString(q):
		return "", invalid("the question must be valid text of at most %d bytes", maxQuestion)
	case req.ChatID < 0:
		return "", invalid("bad chat id")
	case req.ClientID != "" && !clientIDRe.MatchString(req.ClientID):
		return "", invalid("client_id must be 8–64 letters, digits or dashes")
	}
	ws, err := d.workspace(ctx, req.Workspace)
	if err != nil {
		return "", err
	}
	if req.ChatID > 0 {
		chats, err := d.core.Chats(ctx, ws)
		if err != nil {
			return "", err
		}
		if !slices.ContainsFunc(chats, func(c store.Chat) bool { return c.ID == req.ChatID }) {
			return "", fmt.Errorf("chat %d in %q: %w", req.ChatID, ws, app.ErrNotFound)
		}
	}

	id := app.NewRequestID()
	channel := "ask:" + id
	if req.ClientID != "" {
		channel = "ask:" + req.ClientID
	}
	rctx, cancel := context.WithCancel(ctx)
	run := &askRun{cancel: cancel}
	d.mu.Lock()
	switch {
	case len(d.inflight) >= maxInflight:
		d.mu.Unlock()
		cancel()
		return "", fmt.Errorf("%w: %d answers are already running", app.ErrBusy, maxInflight)
	case req.ClientID != "" && d.clients[req.ClientID] != "":
		d.mu.Unlock()
		cancel()
		return "", invalid("client_id is already in use")
	}
	d.inflight[id] = run
	if req.ClientID != "" {
		d.clients[req.ClientID] = id
	}
	d.wg.Add(1)
	d.mu.Unlock()

	go func() {
		defer d.wg.Done()
		defer cancel()
		sink := func(event string, data any) error {
			if err := rctx.Err(); err != nil {
				return err
			}
			d.emit(channel, askEvent{Type: event, Data: data})
			return nil
		}
		_, err := d.core.Ask(rctx, app.AskRequest{Question: q, Workspace: ws, ChatID: req.ChatID, RequestID: id, Received: received}, sink)
		if err != nil && rctx.Err() == nil {
			d.emit(channel, askEvent{Type: "error", Data: map[string]string{"error": err.Error()}})
		}
		d.mu.Lock()
		delete(d.inflight, id)
		if req.ClientID != "" {
			delete(d.clients, req.ClientID)
		}
		ui := run.ui
		d.mu.Unlock()
		if ui != nil {
			d.core.ReportUI(context.WithoutCancel(ctx), id, ui[0], ui[1])
		}
	}()
	return id, nil
}

// Cancel stops an answer (by request id or client id).
func (d *App) Cancel(id string) error {
	if !requestIDRe.MatchString(id) {
		return invalid("bad request id")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if rid, ok := d.clients[id]; ok {
		id = rid
	}
	run, ok := d.inflight[id]
	if !ok {
		return fmt.Errorf("request %s: %w (not in flight)", id, app.ErrNotFound)
	}
	run.cancel()
	return nil
}

// ReportUI records the UI's own TTFT and paint time for a request.
func (d *App) ReportUI(id string, uiTTFTms, paintMs float64) error {
	ctx, err := d.ready()
	if err != nil {
		return err
	}
	if !requestIDRe.MatchString(id) {
		return invalid("bad request id")
	}
	if !(uiTTFTms > 0 && uiTTFTms <= 3.6e6 && paintMs >= 0 && paintMs <= uiTTFTms) {
		return invalid("ui_ttft_ms must be in (0, 1h] and paint_ms in [0, ui_ttft_ms]")
	}
	d.mu.Lock()
	if run, ok := d.inflight[id]; ok {
		run.ui = &[2]float64{uiTTFTms, paintMs} // applied when the trace is stored
		d.mu.Unlock()
		return nil
	}
	d.mu.Unlock()
	return d.core.ReportUI(ctx, id, uiTTFTms, paintMs)
}

// Workspaces lists the workspaces with their folders and counts.
func (d *App) Workspaces() ([]app.WorkspaceInfo, error) {
	ctx, err := d.ready()
	if err != nil {
		return nil, err
	}
	wss, err := d.core.Workspaces(ctx)
	if wss == nil && err == nil {
		wss = []app.WorkspaceInfo{}
	}
	return wss, err
}

// CreateWorkspace creates a workspace (app validates the name).
func (d *App) CreateWorkspace(name string) (app.WorkspaceInfo, error) {
	ctx, err := d.ready()
	if err != nil {
		return app.WorkspaceInfo{}, err
	}
	if len(name) > maxNameLen || !utf8.ValidString(name) || strings.ContainsFunc(name, isControl) {
		return app.WorkspaceInfo{}, invalid("workspace names are 1–%d printable characters", maxNameLen)
	}
	w, err := d.core.CreateWorkspace(ctx, name)
	if err == nil {
		d.follow(w.Name)
	}
	return w, err
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// AddFolder opens the native folder picker and adds the chosen folder to
// the workspace, which starts indexing it. It returns the folder, or "" when
// the picker was cancelled. The page never supplies the path.
func (d *App) AddFolder(workspace string) (string, error) {
	ctx, err := d.ready()
	if err != nil {
		return "", err
	}
	ws, err := d.workspace(ctx, workspace)
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	if d.picking {
		d.mu.Unlock()
		return "", invalid("a folder picker is already open")
	}
	d.picking = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.picking = false
		d.mu.Unlock()
	}()
	path, err := d.pickFolder("Add a folder to " + ws)
	if err != nil || path == "" {
		return "", err
	}
	d.follow(ws)
	if err := d.core.AddFolder(ctx, ws, path); err != nil {
		return "", err
	}
	return path, nil
}

// RemoveFolder removes one of the workspace's folders and its documents.
func (d *App) RemoveFolder(workspace, path string) error {
	ctx, err := d.ready()
	if err != nil {
		return err
	}
	ws, err := d.workspace(ctx, workspace)
	if err != nil {
		return err
	}
	wss, err := d.core.Workspaces(ctx)
	if err != nil {
		return err
	}
	for _, w := range wss {
		if w.Name == ws && slices.Contains(w.Folders, path) {
			return d.core.RemoveFolder(ctx, ws, path)
		}
	}
	return fmt.Errorf("%q is not a folder of %q: %w", path, ws, app.ErrNotFound)
}

// Reindex indexes the workspace's folders again, in the background.
func (d *App) Reindex(workspace string) error {
	ctx, err := d.ready()
	if err != nil {
		return err
	}
	ws, err := d.workspace(ctx, workspace)
	if err != nil {
		return err
	}
	d.follow(ws)
	return d.core.StartIndex(ws, nil)
}

// Documents lists the workspace's documents and their indexing state.
func (d *App) Documents(workspace string) ([]app.DocumentInfo, error) {
	ctx, err := d.ready()
	if err != nil {
		return nil, err
	}
	ws, err := d.workspace(ctx, workspace)
	if err != nil {
		return nil, err
	}
	return d.core.Documents(ctx, ws)
}

// Chats lists the workspace's chats, newest first.
func (d *App) Chats(workspace string) ([]store.Chat, error) {
	ctx, err := d.ready()
	if err != nil {
		return nil, err
	}
	ws, err := d.workspace(ctx, workspace)
	if err != nil {
		return nil, err
	}
	return d.core.Chats(ctx, ws)
}

// Chat returns a chat's messages.
func (d *App) Chat(id int64) (app.ChatWithMessages, error) {
	ctx, err := d.ready()
	if err != nil {
		return app.ChatWithMessages{}, err
	}
	if id <= 0 {
		return app.ChatWithMessages{}, invalid("bad chat id")
	}
	return d.core.Chat(ctx, id)
}

// Chunk returns one passage with its location.
func (d *App) Chunk(id int64) (app.Source, error) {
	ctx, err := d.ready()
	if err != nil {
		return app.Source{}, err
	}
	if id <= 0 {
		return app.Source{}, invalid("bad chunk id")
	}
	return d.core.Chunk(ctx, id)
}

// OpenSource opens the file behind a passage with the system's default
// application. app.SourcePath refuses files outside the workspace's
// folders; files of a type that could run when opened (scripts, programs,
// shortcuts: anything not on the document list) are shown in their folder
// instead of opened.
func (d *App) OpenSource(chunkID int64) error {
	ctx, err := d.ready()
	if err != nil {
		return err
	}
	if chunkID <= 0 {
		return invalid("bad chunk id")
	}
	path, _, err := d.core.SourcePath(ctx, chunkID)
	if err != nil {
		return err
	}
	if !filepath.IsAbs(path) {
		return fmt.Errorf("source path %q is not absolute", path)
	}
	return d.openPath(path, !openable(path))
}

// openable says whether a file may be handed to the OS opener: a document
// type, never something the OS would execute.
func openable(path string) bool {
	return slices.Contains(openableSuffix, strings.ToLower(filepath.Ext(path)))
}

// openWithOS opens path with the default application, or shows it in its
// folder when reveal is set. Arguments go to the program directly (no shell).
func openWithOS(path string, reveal bool) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		if reveal {
			cmd = exec.Command("open", "-R", "--", path)
		} else {
			cmd = exec.Command("open", "--", path)
		}
	case "windows":
		if reveal {
			cmd = exec.Command("explorer.exe", "/select,"+path)
		} else {
			cmd = exec.Command("rundll32.exe", "url.dll,FileProtocolHandler", path)
		}
	default:
		if reveal {
			path = filepath.Dir(path)
		}
		cmd = exec.Command("xdg-open", path)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	go cmd.Wait()
	return nil
}

// Traces returns recent traces, newest first.
func (d *App) Traces(limit int) ([]json.RawMessage, error) {
	ctx, err := d.ready()
	if err != nil {
		return nil, err
	}
	if limit < 1 || limit > 1000 {
		return nil, invalid("limit must be 1–1000")
	}
	return d.core.Traces(ctx, limit)
}

// Trace returns one trace.
func (d *App) Trace(id string) (*app.Trace, error) {
	ctx, err := d.ready()
	if err != nil {
		return nil, err
	}
	if !requestIDRe.MatchString(id) {
		return nil, invalid("bad request id")
	}
	return d.core.Trace(ctx, id)
}

// TraceStats returns per-stage percentiles over a window (15m, 1h, 24h, 7d, all).
func (d *App) TraceStats(window string) (app.TraceStats, error) {
	ctx, err := d.ready()
	if err != nil {
		return app.TraceStats{}, err
	}
	if !statsWindowRe.MatchString(window) {
		return app.TraceStats{}, invalid("window must look like 15m, 1h, 24h, 7d or all")
	}
	return d.core.Stats(ctx, window)
}

// Models lists the model files found on this machine.
func (d *App) Models() ([]app.ModelFile, error) {
	ctx, err := d.ready()
	if err != nil {
		return nil, err
	}
	ms, err := d.core.Models(ctx)
	if ms == nil && err == nil {
		ms = []app.ModelFile{}
	}
	return ms, err
}

// System describes the CPU, the runner builds and the models in use.
func (d *App) System() (app.System, error) {
	if _, err := d.ready(); err != nil {
		return app.System{}, err
	}
	return d.core.System(), nil
}

// Settings returns the current settings.
func (d *App) Settings() (app.Settings, error) {
	if _, err := d.ready(); err != nil {
		return app.Settings{}, err
	}
	return d.core.Settings(), nil
}

// SaveSettings merges the given fields into the current settings (as PUT
// /api/settings does) and stores them. A model must be one of the files
// Models lists (or the one already set, or none): the page cannot point the
// engine at an arbitrary file.
func (d *App) SaveSettings(patch json.RawMessage) (app.Settings, error) {
	ctx, err := d.ready()
	if err != nil {
		return app.Settings{}, err
	}
	if len(patch) > 64<<10 {
		return app.Settings{}, invalid("settings too large")
	}
	cur := d.core.Settings()
	s := cur
	dec := json.NewDecoder(bytes.NewReader(patch))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return app.Settings{}, invalid("settings: %v", err)
	}
	var found []app.ModelFile
	for _, m := range []struct{ v, was, kind string }{
		{s.ChatModel, cur.ChatModel, "chat model"}, {s.EmbedModel, cur.EmbedModel, "embedding model"}, {s.RerankModel, cur.RerankModel, "rerank model"}} {
		if m.v == "" || m.v == m.was {
			continue
		}
		if found == nil {
			if found, err = d.core.Models(ctx); err != nil {
				return app.Settings{}, err
			}
		}
		if !slices.ContainsFunc(found, func(f app.ModelFile) bool { return f.Path == m.v }) {
			return app.Settings{}, invalid("%s %q is not one of the models found on this machine", m.kind, m.v)
		}
	}
	if err := d.core.SaveSettings(ctx, s); err != nil {
		return app.Settings{}, err
	}
	return s, nil
}

// follow forwards a workspace's indexing progress to the page as
// progress:<workspace> events {type: "progress"|"done", data}, at most one
// progress event per progressPeriod (each emit is a script run in the
// webview), errors and the end always.
func (d *App) follow(ws string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx == nil || d.following[ws] {
		return
	}
	ch, stop, err := d.core.Subscribe(ws)
	if err != nil {
		return
	}
	d.following[ws] = true
	ctx, emit, name := d.ctx, d.emit, "progress:"+ws
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer stop()
		tick := time.NewTicker(progressPeriod)
		defer tick.Stop()
		var pending *app.Progress
		var last time.Time
		send := func(v app.Progress) {
			emit(name, askEvent{Type: "progress", Data: v})
			pending, last = nil, time.Now()
		}
		for {
			select {
			case <-ctx.Done():
				return
			case p := <-ch:
				if p.Phase == "done" {
					// The run's summary is stored just after its last event.
					running, sum := d.core.IndexStatus(ws)
					for i := 0; running && i < 100 && ctx.Err() == nil; i++ {
						time.Sleep(20 * time.Millisecond)
						running, sum = d.core.IndexStatus(ws)
					}
					pending = nil
					emit(name, askEvent{Type: "done", Data: sum})
					continue
				}
				v := app.ProgressView(p)
				if p.Err != nil || time.Since(last) >= progressPeriod {
					send(v)
				} else {
					pending = &v
				}
			case <-tick.C:
				if pending != nil {
					send(*pending)
				}
			}
		}
	}()
}
