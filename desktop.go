package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	wruntime "github.com/wailsapp/wails/v2/pkg/runtime"

	"lore/app"
)

// App is the Go surface the desktop UI calls: window.go.main.App.<Method>
// (frontend/src/transport/wails.ts). It only translates: the app service
// validates every argument, since Wails lets every script in the page call
// every exported method. None takes a filesystem path to open or read:
// folders come from the native picker, files to open from a chunk id the
// app checks against the workspace.
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
	following map[string]bool // workspaces whose progress is forwarded
	picking   bool            // a folder picker is open
}

var errNotReady = errors.New("the desktop app is still starting")

func newDesktop(core *app.App) *App {
	return &App{core: core, following: map[string]bool{}}
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
// read-ahead status and the indexing progress of the existing workspaces.
func (d *App) bind(ctx context.Context, emit func(string, any), pick func(string) (string, error), open func(string, bool) error) {
	ctx, cancel := context.WithCancel(ctx)
	d.mu.Lock()
	d.ctx, d.cancel, d.emit, d.pickFolder, d.openPath = ctx, cancel, emit, pick, open
	d.mu.Unlock()
	d.followReadAhead()
	if wss, err := d.core.Workspaces(ctx); err == nil {
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

// event is the payload of an ask:<id>, progress:<workspace> or prefetch event.
type event struct {
	Type string `json:"type"`
	Data any    `json:"data"`
}

// AskArgs is a question from the UI. ClientID names the event channel
// (ask:<client_id>) the page subscribed to before calling Ask, so no event
// is emitted before anyone listens.
type AskArgs struct {
	Question  string `json:"question"`
	Workspace string `json:"workspace"`
	ChatID    int64  `json:"chat_id,omitempty"`
	Route     string `json:"route,omitempty"` // auto, main or fast
	ClientID  string `json:"client_id"`
}

// Ask starts answering and returns the request id once the question is
// admitted; the answer streams as ask:<client_id> events {type, data}:
// trace, stage, sources, token, done or error (as the HTTP API's stream).
func (d *App) Ask(req AskArgs) (string, error) {
	received := time.Now()
	ctx, err := d.ready()
	if err != nil {
		return "", err
	}
	id := app.NewRequestID()
	channel := "ask:" + id
	if req.ClientID != "" {
		channel = "ask:" + req.ClientID
	}
	admitted := make(chan error, 1)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		first := true
		_, err := d.core.Ask(ctx, app.AskRequest{Question: req.Question, Workspace: req.Workspace, ChatID: req.ChatID,
			Route: req.Route, ClientID: req.ClientID, RequestID: id, Received: received}, func(ev app.Event) error {
			if first {
				first = false
				admitted <- nil
			}
			d.emit(channel, event{Type: ev.Kind(), Data: ev})
			return ctx.Err()
		})
		if first {
			admitted <- err // refused before its first event
		} else if err != nil && ctx.Err() == nil {
			d.emit(channel, event{Type: "error", Data: map[string]string{"error": err.Error()}})
		}
	}()
	if err := <-admitted; err != nil {
		return "", err
	}
	return id, nil
}

// Prefetch reads a draft question's prompt into the model while the user
// types (the page calls it debounced); Ask adopts it when the passages match.
func (d *App) Prefetch(req app.PrefetchRequest) (app.PrefetchResult, error) {
	return get(d, func(ctx context.Context) (app.PrefetchResult, error) {
		if req.ClientID == "" {
			req.ClientID = "desktop"
		}
		return d.core.Prefetch(ctx, req)
	})
}

// PrefetchStatus says what the drafts have read ahead for the next question.
func (d *App) PrefetchStatus() (app.PrefetchStatus, error) {
	return get(d, func(context.Context) (app.PrefetchStatus, error) { return d.core.PrefetchStatus(), nil })
}

// Cancel stops an answer (by request id or client id).
func (d *App) Cancel(id string) error {
	if _, err := d.ready(); err != nil {
		return err
	}
	return d.core.Cancel(id)
}

// ReportUI records the UI's own TTFT and paint time for a request.
func (d *App) ReportUI(id string, uiTTFTms, paintMs float64) error {
	ctx, err := d.ready()
	if err != nil {
		return err
	}
	return d.core.ReportUI(ctx, id, uiTTFTms, paintMs)
}

// Workspaces lists the workspaces with their folders and counts.
func (d *App) Workspaces() ([]app.WorkspaceInfo, error) {
	return get(d, d.core.Workspaces)
}

// CreateWorkspace creates a workspace.
func (d *App) CreateWorkspace(name string) (app.WorkspaceInfo, error) {
	return get(d, func(ctx context.Context) (app.WorkspaceInfo, error) {
		w, err := d.core.CreateWorkspace(ctx, name)
		if err == nil {
			d.follow(w.Name)
		}
		return w, err
	})
}

// AddFolder opens the native folder picker and adds the chosen folder to
// the workspace, which starts indexing it. It returns the folder, or "" when
// the picker was cancelled. The page never supplies the path.
func (d *App) AddFolder(workspace string) (string, error) {
	ctx, err := d.ready()
	if err != nil {
		return "", err
	}
	if _, err := d.core.IndexStatus(ctx, workspace); err != nil {
		return "", err // no picker for a workspace that does not exist
	}
	d.mu.Lock()
	if d.picking {
		d.mu.Unlock()
		return "", fmt.Errorf("%w: a folder picker is already open", app.ErrInvalid)
	}
	d.picking = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.picking = false
		d.mu.Unlock()
	}()
	path, err := d.pickFolder("Add a folder to " + workspace)
	if err != nil || path == "" {
		return "", err
	}
	d.follow(workspace)
	if err := d.core.AddFolder(ctx, workspace, path); err != nil {
		return "", err
	}
	return path, nil
}

// RemoveFolder removes one of the workspace's folders and its documents.
func (d *App) RemoveFolder(workspace, path string) error {
	return call(d, func(ctx context.Context) error { return d.core.RemoveFolder(ctx, workspace, path) })
}

// Reindex indexes the workspace's folders again, in the background.
func (d *App) Reindex(workspace string) error {
	return call(d, func(ctx context.Context) error {
		d.follow(workspace)
		return d.core.StartIndex(ctx, workspace)
	})
}

// Documents lists the workspace's documents and their indexing state.
func (d *App) Documents(workspace string) ([]app.DocumentInfo, error) {
	return get(d, func(ctx context.Context) ([]app.DocumentInfo, error) { return d.core.Documents(ctx, workspace) })
}

// RenameWorkspace renames a workspace; its progress events follow the new name.
func (d *App) RenameWorkspace(workspace, name string) (app.WorkspaceInfo, error) {
	return get(d, func(ctx context.Context) (app.WorkspaceInfo, error) {
		w, err := d.core.RenameWorkspace(ctx, workspace, name)
		if err == nil {
			d.follow(w.Name)
		}
		return w, err
	})
}

// DeleteWorkspace deletes a workspace and what Lore keeps of it (not the files).
func (d *App) DeleteWorkspace(workspace string) error {
	return call(d, func(ctx context.Context) error { return d.core.DeleteWorkspace(ctx, workspace) })
}

// SearchChats finds the workspace's chats whose title or turns hold the query's words.
func (d *App) SearchChats(workspace, query string) ([]app.ChatMatch, error) {
	return get(d, func(ctx context.Context) ([]app.ChatMatch, error) { return d.core.SearchChats(ctx, workspace, query) })
}

// Chats lists the workspace's chats, newest first.
func (d *App) Chats(workspace string) ([]app.Chat, error) {
	return get(d, func(ctx context.Context) ([]app.Chat, error) { return d.core.Chats(ctx, workspace) })
}

// Chat returns a chat's messages.
func (d *App) Chat(id int64) (app.ChatWithMessages, error) {
	return get(d, func(ctx context.Context) (app.ChatWithMessages, error) { return d.core.Chat(ctx, id) })
}

// Chunk returns one passage with its location.
func (d *App) Chunk(id int64) (app.Source, error) {
	return get(d, func(ctx context.Context) (app.Source, error) { return d.core.Chunk(ctx, id) })
}

// OpenSource opens the file behind a passage with the system's default
// application. app.SourcePath refuses files outside the workspace's
// folders; files of a type that could run when opened (scripts, programs,
// shortcuts: anything not on the document list) are shown in their folder
// instead of opened.
func (d *App) OpenSource(chunkID int64) error {
	return call(d, func(ctx context.Context) error {
		path, err := d.core.SourcePath(ctx, chunkID)
		if err != nil {
			return err
		}
		if !filepath.IsAbs(path) {
			return fmt.Errorf("source path %q is not absolute", path)
		}
		return d.openPath(path, !openable(path))
	})
}

// Traces returns recent traces, newest first.
func (d *App) Traces(limit int) ([]json.RawMessage, error) {
	return get(d, func(ctx context.Context) ([]json.RawMessage, error) { return d.core.Traces(ctx, limit) })
}

// Trace returns one trace.
func (d *App) Trace(id string) (*app.Trace, error) {
	return get(d, func(ctx context.Context) (*app.Trace, error) { return d.core.Trace(ctx, id) })
}

// TraceStats returns per-stage percentiles over a window (15m, 1h, 24h, 7d, all).
func (d *App) TraceStats(window string) (app.TraceStats, error) {
	return get(d, func(ctx context.Context) (app.TraceStats, error) { return d.core.Stats(ctx, window) })
}

// Models lists the model files found on this machine.
func (d *App) Models() ([]app.ModelFile, error) {
	return get(d, d.core.Models)
}

// System describes the CPU, the runner builds and the models in use.
func (d *App) System() (app.System, error) {
	return get(d, func(context.Context) (app.System, error) { return d.core.System(), nil })
}

// Sweep returns the efSearch trade-off last measured on this machine.
func (d *App) Sweep() (app.HNSWSweep, error) {
	return get(d, d.core.Sweep)
}

// Settings returns the current settings.
func (d *App) Settings() (app.Settings, error) {
	return get(d, func(context.Context) (app.Settings, error) { return d.core.Settings(), nil })
}

// SaveSettings merges the given fields into the current settings (as PUT
// /api/settings does) and stores them; the app validates them.
func (d *App) SaveSettings(patch json.RawMessage) (app.Settings, error) {
	return get(d, func(ctx context.Context) (app.Settings, error) {
		if len(patch) > 64<<10 {
			return app.Settings{}, fmt.Errorf("%w: settings too large", app.ErrInvalid)
		}
		s := d.core.Settings()
		dec := json.NewDecoder(bytes.NewReader(patch))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return app.Settings{}, fmt.Errorf("%w: settings: %v", app.ErrInvalid, err)
		}
		return s, d.core.SaveSettings(ctx, s)
	})
}

// get runs fn once the app has started.
func get[T any](d *App, fn func(context.Context) (T, error)) (T, error) {
	ctx, err := d.ready()
	if err != nil {
		var zero T
		return zero, err
	}
	return fn(ctx)
}

func call(d *App, fn func(context.Context) error) error {
	_, err := get(d, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) })
	return err
}
