package app

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"lore/engine"
)

// Limits of EmbedTexts and RerankTexts, per request (bodies are also
// capped by the front door).
const (
	MaxEmbedInputs  = 256
	MaxRerankInputs = 256
)

// EmbedTexts embeds texts with this app's embedding model, for the
// OpenAI-compatible /v1/embeddings endpoint (another Lore, or any client,
// using this one as its embedding server). It returns the model's name
// (the file's, without the hash of ID) and one normalised vector per
// text. A single text (a query) runs at question priority, a batch (an
// index being built) behind the questions.
func (a *App) EmbedTexts(ctx context.Context, texts []string) (model string, vecs [][]float32, err error) {
	if err := checkTexts("input", texts, MaxEmbedInputs); err != nil {
		return "", nil, err
	}
	m, release := a.hold()
	defer release()
	if m.embed == nil {
		return "", nil, fmt.Errorf("%w: this Lore has no embedding model", ErrNotFound)
	}
	prio := engine.Background
	if len(texts) == 1 {
		prio = engine.Interactive
	}
	vecs, err = m.embed.Embed(engine.WithPriority(ctx, prio), texts)
	if err != nil {
		return "", nil, fmt.Errorf("embed: %w", err)
	}
	for _, v := range vecs {
		if !finite(v) {
			return "", nil, fmt.Errorf("embed: %w", errNonFinite)
		}
	}
	return servedName(m.embed.ID()), vecs, nil
}

// RerankTexts scores each document's relevance to query with this app's
// rerank model, for the /v1/rerank endpoint; it returns the model's name
// and one score per document, in the documents' order.
func (a *App) RerankTexts(ctx context.Context, query string, docs []string) (model string, scores []float32, err error) {
	if err := CheckText("query", query, MaxQuestion); err != nil {
		return "", nil, err
	}
	if err := checkTexts("documents", docs, MaxRerankInputs); err != nil {
		return "", nil, err
	}
	m, release := a.hold()
	defer release()
	if m.rerank == nil {
		return "", nil, fmt.Errorf("%w: this Lore has no rerank model", ErrNotFound)
	}
	scores, err = m.rerank.Rerank(engine.WithPriority(ctx, engine.Interactive), query, docs)
	if err != nil {
		return "", nil, fmt.Errorf("rerank: %w", err)
	}
	if len(scores) != len(docs) {
		return "", nil, fmt.Errorf("rerank: %d scores for %d documents", len(scores), len(docs))
	}
	if !finite(scores) {
		return "", nil, fmt.Errorf("rerank: %w", errNonFinite)
	}
	return servedName(m.rerank.ID()), scores, nil
}

// errNonFinite refuses a model's NaN or infinite output: JSON cannot carry
// it, and a client would take it for a number.
var errNonFinite = errors.New("the model gave a value that is not a finite number")

func finite(xs []float32) bool {
	for _, x := range xs {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
	}
	return true
}

// CheckText checks a text a caller sends, a question or a query (field
// names it): not blank, valid UTF-8, at most max bytes. Its errors are
// ErrInvalid. Callers that keep the text trimmed trim it first.
func CheckText(field, s string, max int) error {
	switch {
	case strings.TrimSpace(s) == "":
		return fmt.Errorf("%w: the %s is empty", ErrInvalid, field)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: the %s is not valid UTF-8 text", ErrInvalid, field)
	case len(s) > max:
		return fmt.Errorf("%w: the %s is too long (%d bytes, at most %d)", ErrInvalid, field, len(s), max)
	}
	return nil
}

// checkTexts refuses an empty list, one longer than most, and texts that
// are empty or not UTF-8.
func checkTexts(field string, texts []string, most int) error {
	if len(texts) == 0 || len(texts) > most {
		return fmt.Errorf("%w: %s must hold 1–%d texts, got %d", ErrInvalid, field, most, len(texts))
	}
	for i, t := range texts {
		if t == "" || !utf8.ValidString(t) {
			return fmt.Errorf("%w: %s[%d] is empty or not UTF-8 text", ErrInvalid, field, i)
		}
	}
	return nil
}

// servedName is the model name an endpoint reports: a local model's file
// name (its ID without the "@hash" of size and time), a remote one's
// model name (a Lore passing the role on to another server).
func servedName(id string) string {
	if rest, ok := strings.CutPrefix(id, "remote:"); ok {
		if i := strings.LastIndex(rest, "#"); i >= 0 {
			return rest[i+1:]
		}
		return rest
	}
	name, _, _ := strings.Cut(id, "@")
	return name
}
