package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"lore/app"
)

// The OpenAI-compatible endpoint answers with Lore's pipeline: the last
// user message is the question, retrieval runs over the workspace named by
// "model" ("lore" or "lore:NAME"; default workspace otherwise), and earlier
// turns are ignored (the chat history lives in Lore).
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	Stream bool `json:"stream"`
	// Accepted and ignored so that common clients work.
	Temperature *float64 `json:"temperature,omitempty"`
	MaxTokens   *int     `json:"max_tokens,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	User        string   `json:"user,omitempty"`
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	var req chatRequest
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(&req); err != nil {
		openaiFail(w, fmt.Errorf("%w: %w", errBadRequest, err)) // keeps a MaxBytesError: 413
		return
	}
	question := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			question = req.Messages[i].Content
			break
		}
	}
	if strings.TrimSpace(question) == "" {
		openaiFail(w, fmt.Errorf("%w: no user message", errBadRequest))
		return
	}
	ws := ""
	if name, ok := strings.CutPrefix(req.Model, "lore:"); ok {
		ws = name
	}
	id := "chatcmpl-" + app.NewRequestID()
	created := received.Unix()
	ask := app.AskRequest{Question: question, Workspace: ws, Received: received, RequestID: app.NewRequestID()}

	if !req.Stream {
		var b strings.Builder
		_, err := s.app.Ask(r.Context(), ask, func(ev app.Event) error {
			if tok, ok := ev.(app.Token); ok {
				b.WriteString(tok.Text)
			}
			return nil
		})
		if err != nil { // a partial answer is not an answer
			openaiFail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": model(req.Model),
			"choices": []map[string]any{{"index": 0, "finish_reason": "stop",
				"message": map[string]string{"role": "assistant", "content": b.String()}}},
		})
		return
	}
	stream, err := newSSE(w)
	if err != nil {
		openaiFail(w, err)
		return
	}
	chunk := func(delta map[string]string, finish any) error {
		b, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created,
			"model": model(req.Model), "choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}}})
		return stream.raw("data: " + string(b) + "\n\n")
	}
	_, err = s.app.Ask(r.Context(), ask, func(ev app.Event) error {
		if tok, ok := ev.(app.Token); ok {
			return chunk(map[string]string{"content": tok.Text}, nil)
		}
		return nil
	})
	switch {
	case err != nil && !stream.started:
		openaiFail(w, err) // refused before the first token: a plain status
	case err != nil:
		// OpenAI clients read a failed stream's reason from an error
		// object, and no finish_reason "stop" or [DONE] after it.
		b, _ := json.Marshal(openaiError(http.StatusInternalServerError, err.Error()))
		stream.raw("data: " + string(b) + "\n\n")
	default:
		chunk(map[string]string{}, "stop")
		stream.raw("data: [DONE]\n\n")
	}
}

func model(m string) string {
	if m == "" {
		return "lore"
	}
	return m
}

func (s *Server) openaiModels(w http.ResponseWriter, r *http.Request) {
	wss, err := s.app.Workspaces(r.Context())
	if err != nil {
		openaiFail(w, err)
		return
	}
	data := []map[string]any{{"id": "lore", "object": "model", "owned_by": "lore"}}
	for _, ws := range wss {
		data = append(data, map[string]any{"id": "lore:" + ws.Name, "object": "model", "owned_by": "lore"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// openaiFail writes an app error the way OpenAI's API does, which its
// client libraries parse: {"error": {"message", "type", "code"}} (code is
// a string or null there; the HTTP status carries the number).
func openaiFail(w http.ResponseWriter, err error) {
	code, msg := statusOf(w, err)
	writeJSON(w, code, openaiError(code, msg))
}

func openaiError(code int, msg string) map[string]any {
	typ := "server_error"
	switch {
	case code == http.StatusTooManyRequests:
		typ = "rate_limit_exceeded"
	case code == http.StatusNotFound:
		typ = "not_found_error"
	case code < 500:
		typ = "invalid_request_error"
	}
	return map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": nil}}
}
