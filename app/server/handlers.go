package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
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
	// cancels the generation.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	s.mu.Lock()
	s.inflight[req.RequestID] = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.inflight, req.RequestID)
		s.mu.Unlock()
	}()
	held := &admission{stream: stream}
	_, err = s.app.Ask(ctx, req, held.send)
	held.close()
	if err != nil && !stream.started {
		fail(w, err) // refused before streaming began: a plain status (429, 400…)
		return
	}
	if err != nil && ctx.Err() == nil {
		stream.send("error", errorBody{err.Error()})
	}
}

// admissionHold bounds how long the first events wait for admission.
const admissionHold = 250 * time.Millisecond

// admission holds an answer's first events (the trace and the queue's
// start) back until the queue admits the request. The app emits them before
// asking the queue, and a full queue refuses at once: held back, that
// refusal can still be a plain 429 with Retry-After instead of an error
// inside a 200 stream. A request that waits in the queue gets its held
// events after admissionHold, so the UI can show it queued.
type admission struct {
	mu      sync.Mutex
	stream  *sse
	held    []heldEvent
	timer   *time.Timer
	flushed bool // the held events went out; everything streams now
	closed  bool // the handler is done with the stream
}

type heldEvent struct {
	event string
	data  any
}

var errStreamClosed = errors.New("stream closed")

func (h *admission) send(event string, data any) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errStreamClosed
	}
	if !h.flushed {
		if st, ok := data.(app.StageEvent); event == "trace" || ok && st.Name == "queue" && st.State == "start" {
			h.held = append(h.held, heldEvent{event, data})
			if h.timer == nil {
				h.timer = time.AfterFunc(admissionHold, h.release)
			}
			return nil
		}
		if err := h.flushLocked(); err != nil {
			return err
		}
	}
	return h.stream.send(event, data)
}

// release sends the held events of a request still waiting in the queue.
func (h *admission) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed && !h.flushed {
		h.flushLocked()
	}
}

func (h *admission) flushLocked() error {
	h.flushed = true
	if h.timer != nil {
		h.timer.Stop()
	}
	for _, ev := range h.held {
		if err := h.stream.send(ev.event, ev.data); err != nil {
			return err
		}
	}
	h.held = nil
	return nil
}

// close ends the hold: nothing is written after it, so the handler may use
// the ResponseWriter again (for an error status when nothing was sent).
func (h *admission) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.timer != nil {
		h.timer.Stop()
	}
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	cancel, ok := s.inflight[r.PathValue("id")]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "no such request in flight")
		return
	}
	cancel()
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

func (s *Server) addFolder(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Path string `json:"path"`
	}
	if err := decode(r, &body); err != nil {
		fail(w, err)
		return
	}
	if err := s.app.AddFolder(r.Context(), r.PathValue("ws"), body.Path); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
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
	if err := s.app.StartIndex(r.PathValue("ws"), nil); err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]bool{"started": true})
}

// progress streams indexing progress until the run ends or the client goes.
func (s *Server) progress(w http.ResponseWriter, r *http.Request) {
	ws := r.PathValue("ws")
	ch, stop, err := s.app.Subscribe(ws)
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
	running, last := s.app.IndexStatus(ws)
	if !running {
		stream.send("done", last)
		return
	}
	stream.send("progress", map[string]any{"phase": "scan"})
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	for {
		select {
		case p := <-ch:
			if p.Phase == "done" {
				// The summary is stored when the run returns, just after this.
				time.Sleep(50 * time.Millisecond)
				_, last := s.app.IndexStatus(ws)
				stream.send("done", last)
				return
			}
			if err := stream.send("progress", app.ProgressView(p)); err != nil {
				return
			}
		case <-tick.C:
			if running, last := s.app.IndexStatus(ws); !running {
				stream.send("done", last)
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

func (s *Server) chats(w http.ResponseWriter, r *http.Request) {
	reply(w)(s.app.Chats(r.Context(), r.URL.Query().Get("workspace")))
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
		writeError(w, http.StatusBadRequest, err.Error())
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
