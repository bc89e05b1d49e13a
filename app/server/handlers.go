package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"lore/app"
)

// sse writes server-sent events, flushing each one at once.
type sse struct {
	w       http.ResponseWriter
	f       http.Flusher
	started bool
}

func newSSE(w http.ResponseWriter) (*sse, error) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, errors.New("streaming unsupported")
	}
	return &sse{w: w, f: f}, nil
}

func (s *sse) send(event string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	return s.raw(fmt.Sprintf("event: %s\ndata: %s\n\n", event, b))
}

// raw writes text as is and flushes it.
func (s *sse) raw(text string) error {
	if !s.started {
		s.started = true
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Accel-Buffering", "no")
		s.w.WriteHeader(http.StatusOK)
	}
	if _, err := io.WriteString(s.w, text); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

func (s *Server) ask(w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	var req app.AskRequest
	if err := decode(r, &req); err != nil {
		fail(w, err)
		return
	}
	req.Received, req.RequestID = received, app.NewRequestID()
	stream, err := newSSE(w)
	if err != nil {
		fail(w, err)
		return
	}
	// The request's context ends when the client disconnects, which
	// cancels the generation. The app refuses (a full queue, bad input)
	// before its first event, so a refusal is still a plain status.
	_, err = s.app.Ask(r.Context(), req, func(ev app.Event) error { return stream.send(ev.Kind(), ev) })
	if err != nil && !stream.started {
		fail(w, err)
		return
	}
	if err != nil && r.Context().Err() == nil {
		stream.send("error", errorBody{err.Error()})
	}
}

// prefetch starts reading a draft question's prompt while the user types.
func (s *Server) prefetch(w http.ResponseWriter, r *http.Request) {
	var req app.PrefetchRequest
	if err := decode(r, &req); err != nil {
		fail(w, err)
		return
	}
	if req.ClientID == "" {
		req.ClientID = r.RemoteAddr
	}
	res, err := s.app.Prefetch(r.Context(), req)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, res)
}

// prefetchStatus says what the drafts have read ahead for the next question.
func (s *Server) prefetchStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.app.PrefetchStatus())
}

// prefetchEvents streams what the drafts have read ahead: a "status" event
// now and after every change, until the client goes or the server stops.
func (s *Server) prefetchEvents(w http.ResponseWriter, r *http.Request) {
	done, ok := s.holdStream(w)
	if !ok {
		return
	}
	defer done()
	stream, err := newSSE(w)
	if err != nil {
		fail(w, err)
		return
	}
	events, stop := s.app.WatchPrefetch(r.Context())
	defer stop()
	for {
		select {
		case st := <-events:
			if err := stream.send("status", st); err != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	if err := s.app.Cancel(r.PathValue("id")); err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"cancelled": true})
}

func (s *Server) workspaces(w http.ResponseWriter, r *http.Request) {
	reply(w)(s.app.Workspaces(r.Context()))
}

func (s *Server) createWorkspace(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"name"`
	}
	if err := decode(r, &body); err != nil {
		fail(w, err)
		return
	}
	reply(w)(s.app.CreateWorkspace(r.Context(), body.Name))
}

func (s *Server) renameWorkspace(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"name"`
	}
	if err := decode(r, &body); err != nil {
		fail(w, err)
		return
	}
	reply(w)(s.app.RenameWorkspace(r.Context(), r.PathValue("ws"), body.Name))
}

func (s *Server) deleteWorkspace(w http.ResponseWriter, r *http.Request) {
	if err := s.app.DeleteWorkspace(r.Context(), r.PathValue("ws")); err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"deleted": true})
}

func (s *Server) addFolder(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Path string `json:"path"`
	}
	if err := decode(r, &body); err != nil {
		fail(w, err)
		return
	}
	if err := s.app.AddFolder(r.Context(), r.PathValue("ws"), body.Path); err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"path": body.Path})
}

func (s *Server) removeFolder(w http.ResponseWriter, r *http.Request) {
	if err := s.app.RemoveFolder(r.Context(), r.PathValue("ws"), r.URL.Query().Get("path")); err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"removed": true})
}

func (s *Server) reindex(w http.ResponseWriter, r *http.Request) {
	if err := s.app.StartIndex(r.Context(), r.PathValue("ws")); err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]bool{"started": true})
}

// holdStream counts an event stream open until done is called; beyond the
// cap it answers 429 and says false. Each open stream holds a goroutine
// and a subscription, so their number is capped.
func (s *Server) holdStream(w http.ResponseWriter) (done func(), ok bool) {
	if s.progressN.Add(1) > s.maxProgress {
		s.progressN.Add(-1)
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many event streams open (at most %d)", s.maxProgress))
		return nil, false
	}
	return func() { s.progressN.Add(-1) }, true
}

// progress streams indexing progress until the run ends or the client goes.
func (s *Server) progress(w http.ResponseWriter, r *http.Request) {
	done, ok := s.holdStream(w)
	if !ok {
		return
	}
	defer done()
	events, now, stop, err := s.app.Subscribe(r.Context(), r.PathValue("ws"))
	if err != nil {
		fail(w, err)
		return
	}
	defer stop()
	stream, err := newSSE(w)
	if err != nil {
		fail(w, err)
		return
	}
	if !now.Running {
		stream.send("done", now.Last)
		return
	}
	stream.send("progress", app.Progress{Phase: "scan"})
	for {
		select {
		case ev := <-events:
			if err := stream.send(ev.Kind(), ev.Payload()); err != nil || ev.Done != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

func (s *Server) documents(w http.ResponseWriter, r *http.Request) {
	reply(w)(s.app.Documents(r.Context(), r.PathValue("ws")))
}

// chats lists a workspace's chats; with q, those whose title or turns hold
// its words.
func (s *Server) chats(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Has("q") {
		reply(w)(s.app.SearchChats(r.Context(), q.Get("workspace"), q.Get("q")))
		return
	}
	reply(w)(s.app.Chats(r.Context(), q.Get("workspace")))
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad chat id")
		return
	}
	reply(w)(s.app.Chat(r.Context(), id))
}

func (s *Server) chunk(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad chunk id")
		return
	}
	reply(w)(s.app.Chunk(r.Context(), id))
}

func (s *Server) traces(w http.ResponseWriter, r *http.Request) {
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if limit == 0 {
		limit = 50
	}
	reply(w)(s.app.Traces(r.Context(), limit))
}

func (s *Server) trace(w http.ResponseWriter, r *http.Request) {
	reply(w)(s.app.Trace(r.Context(), r.PathValue("id")))
}

func (s *Server) traceStats(w http.ResponseWriter, r *http.Request) {
	window := r.URL.Query().Get("window")
	if window == "" {
		window = "24h"
	}
	reply(w)(s.app.Stats(r.Context(), window))
}

func (s *Server) reportUI(w http.ResponseWriter, r *http.Request) {
	var body struct {
		UITTFT float64 `json:"ui_ttft_ms"`
		Paint  float64 `json:"paint_ms"`
	}
	if err := decode(r, &body); err != nil {
		fail(w, err)
		return
	}
	if err := s.app.ReportUI(r.Context(), r.PathValue("id"), body.UITTFT, body.Paint); err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	reply(w)(s.app.Models(r.Context()))
}

func (s *Server) system(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.app.System())
}

func (s *Server) sweep(w http.ResponseWriter, r *http.Request) {
	sw, err := s.app.Sweep(r.Context())
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sw)
}

func (s *Server) getSettings(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.app.Settings())
}

func (s *Server) putSettings(w http.ResponseWriter, r *http.Request) {
	set := s.app.Settings()
	if err := decode(r, &set); err != nil {
		fail(w, err)
		return
	}
	if err := s.app.SaveSettings(r.Context(), set); err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, set)
}

// reply writes v as JSON, or the error.
func reply(w http.ResponseWriter) func(any, error) {
	return func(v any, err error) {
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}
