package server

import (
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
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

// embeddingsRequest is OpenAI's POST /v1/embeddings body. input is a
// string or a list of strings (token arrays are refused); encoding_format
// float (the default here) or base64 (what OpenAI's own clients ask for:
// little-endian float32s).
type embeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format,omitempty"`
	// Accepted and ignored so that common clients work.
	User       string `json:"user,omitempty"`
	Dimensions *int   `json:"dimensions,omitempty"`
}

// embeddings answers with this Lore's embedding model, whatever model
// the request names: the reply's "model" says which one ran, so a client
// can refuse vectors from a model its index was not built with.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	var req embeddingsRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		openaiFail(w, fmt.Errorf("%w: %w", errBadRequest, err))
		return
	}
	texts, err := stringList(req.Input)
	if err != nil {
		openaiFail(w, fmt.Errorf("%w: input: %w", errBadRequest, err))
		return
	}
	if req.Dimensions != nil {
		openaiFail(w, fmt.Errorf("%w: dimensions is not supported: the model's own size is used", errBadRequest))
		return
	}
	b64 := false
	switch req.EncodingFormat {
	case "", "float":
	case "base64":
		b64 = true
	default:
		openaiFail(w, fmt.Errorf("%w: encoding_format must be float or base64", errBadRequest))
		return
	}
	name, vecs, err := s.app.EmbedTexts(r.Context(), texts)
	if err != nil {
		openaiFail(w, err)
		return
	}
	data := make([]map[string]any, len(vecs))
	for i, v := range vecs {
		var emb any = v
		if b64 {
			buf := make([]byte, 4*len(v))
			for j, x := range v {
				binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(x))
			}
			emb = base64.StdEncoding.EncodeToString(buf)
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": emb}
	}
	// No usage: Lore does not count the embedding model's tokens, and a 0
	// would claim it did.
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "model": name, "data": data})
}

// rerankRequest is llama-server's POST /v1/rerank body (also Jina's and
// Cohere's shape): documents are strings or {"text": …} objects.
type rerankRequest struct {
	Model           string            `json:"model"`
	Query           string            `json:"query"`
	Documents       []json.RawMessage `json:"documents"`
	TopN            *int              `json:"top_n,omitempty"`
	ReturnDocuments bool              `json:"return_documents,omitempty"`
}

// rerank scores the documents with this Lore's rerank model and answers
// as llama-server does: results sorted by relevance_score, best first,
// cut to top_n, each naming its document's index.
func (s *Server) rerank(w http.ResponseWriter, r *http.Request) {
	var req rerankRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		openaiFail(w, fmt.Errorf("%w: %w", errBadRequest, err))
		return
	}
	docs := make([]string, len(req.Documents))
	for i, d := range req.Documents {
		var obj struct {
			Text *string `json:"text"`
		}
		if json.Unmarshal(d, &docs[i]) != nil && (json.Unmarshal(d, &obj) != nil || obj.Text == nil) {
			openaiFail(w, fmt.Errorf("%w: documents[%d] must be a string or {\"text\": string}", errBadRequest, i))
			return
		} else if obj.Text != nil {
			docs[i] = *obj.Text
		}
	}
	if req.TopN != nil && *req.TopN < 0 {
		openaiFail(w, fmt.Errorf("%w: top_n must not be negative", errBadRequest))
		return
	}
	name, scores, err := s.app.RerankTexts(r.Context(), req.Query, docs)
	if err != nil {
		openaiFail(w, err)
		return
	}
	order := make([]int, len(scores))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(scores[b], scores[a]) })
	if req.TopN != nil && *req.TopN > 0 && *req.TopN < len(order) {
		order = order[:*req.TopN]
	}
	results := make([]map[string]any, len(order))
	for i, j := range order {
		results[i] = map[string]any{"index": j, "relevance_score": scores[j]}
		if req.ReturnDocuments {
			results[i]["document"] = map[string]string{"text": docs[j]}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "model": name, "results": results})
}

// stringList reads a JSON string or list of strings.
func stringList(raw json.RawMessage) ([]string, error) {
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, errors.New("want a string or a list of strings (token arrays are not accepted)")
	}
	return many, nil
}
