package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"lore/app/remote"
	"lore/engine"
)

// remoteOptions are the shared options of both remote roles.
func (a *App) remoteOptions(url, model string, s Settings) remote.Options {
	return remote.Options{URL: url, Model: model, APIKey: a.cfg.APIKey, InsecureSkipVerify: s.RemoteInsecure,
		PlainKey: s.RemotePlainKey, FirstToken: time.Duration(s.RemoteTTFTMs) * time.Millisecond}
}

// openRemoteChat opens the remote chat role; the local chat model, if
// any, becomes its fallback.
func (a *App) openRemoteChat(s Settings) (*remote.Chat, error) {
	if s.ChatURLModel == "" {
		return nil, fmt.Errorf("%w: chat_url needs a model name (--chat-url-model)", ErrInvalid)
	}
	return remote.NewChat(a.remoteOptions(s.ChatURL, s.ChatURLModel, s))
}

// openRemoteEmbed opens the remote embedding role, held to the dimension
// the index already stores for its model id: vectors of another size are
// refused, never mixed in.
func (a *App) openRemoteEmbed(s Settings) (*remote.Embedder, error) {
	if s.EmbedURLModel == "" {
		return nil, fmt.Errorf("%w: embed_url needs a model name (--embed-url-model)", ErrInvalid)
	}
	o := a.remoteOptions(s.EmbedURL, s.EmbedURLModel, s)
	probe, err := remote.NewEmbedder(o, 0)
	if err != nil {
		return nil, err
	}
	dim, err := a.db.EmbeddingDim(context.Background(), probe.ID())
	if err != nil {
		return nil, err
	}
	return remote.NewEmbedder(o, dim)
}

// rerankCooldown is how long a failed remote reranker is left alone
// before a question tries it again (doubled with each failure in a row):
// meanwhile questions go straight to the fallback with the whole budget.
const rerankCooldown = 10 * time.Second

// openRemoteRerank opens the remote rerank role. Its timeout is the
// rerank budget when there is one (at least a second), so that a slow
// server leaves time for the local fallback.
func (a *App) openRemoteRerank(s Settings) (*remote.Reranker, error) {
	if s.RerankURLModel == "" {
		return nil, fmt.Errorf("%w: rerank_url needs a model name (--rerank-url-model)", ErrInvalid)
	}
	o := a.remoteOptions(s.RerankURL, s.RerankURLModel, s)
	o.FirstToken, o.Cooldown = 0, rerankCooldown
	if s.RerankBudgetMs > 0 {
		o.FirstToken = time.Duration(max(s.RerankBudgetMs, 1000)) * time.Millisecond
	}
	return remote.NewReranker(o)
}

// generateChat runs the chat model and, when a remote one is unavailable
// before its first token (down, over its TTFT budget, 429/5xx), lets the
// local model answer the same messages, recorded as a fallback. Without a
// local model the remote's error is the answer's error.
func (x *ask) generateChat(req engine.GenerateRequest, token func(string) error) (engine.Stats, error) {
	m := x.q.m
	st, err := x.plan.gen.Generate(x.ctx, req, token)
	if err == nil || !errors.Is(err, remote.ErrUnavailable) || x.answer.Len() > 0 || x.plan.gen != m.chat {
		return st, err
	}
	if m.fallback == nil {
		return st, fmt.Errorf("%w (no local chat model to fall back to)", err)
	}
	// The prompt was rendered in the remote's ChatML; the local model
	// renders the same messages in its own template.
	msgs, perr := remote.ParseChatML(req.Prompt)
	if perr != nil {
		return st, err
	}
	x.degrade(FallbackRerank, "remote chat unavailable, the local model answered: "+err.Error())
	x.t.Route = m.fallback.ID() + " (fallback from " + m.chat.ID() + ")"
	req.Prompt, req.Messages = "", msgs
	return m.fallback.Generate(x.ctx, req, token)
}

// DataLeaves says, per role, which server receives what: empty when
// everything stays on this machine (the default).
type DataLeaves struct {
	Role string `json:"role"` // chat, embedding, rerank
	URL  string `json:"url"`
	What string `json:"what"`
}

// leaves lists the remote roles of m.
func (m *models) leaves() []DataLeaves {
	out := []DataLeaves{}
	if c, ok := m.chat.(*remote.Chat); ok {
		out = append(out, DataLeaves{Role: "chat", URL: c.URL(),
			What: "your questions, the chat so far and the passages retrieved from your library are sent to this server"})
	}
	if e, ok := m.embed.(*remote.Embedder); ok {
		out = append(out, DataLeaves{Role: "embedding", URL: e.URL(),
			What: "your questions and the text of every indexed passage are sent to this server"})
	}
	if r, ok := m.rerank.(*remote.Reranker); ok {
		out = append(out, DataLeaves{Role: "rerank", URL: r.URL(),
			What: "your questions and the passages retrieved for them are sent to this server"})
	}
	return out
}

// isRemoteReranker says whether r runs on another machine.
func isRemoteReranker(r Reranker) bool {
	_, ok := r.(*remote.Reranker)
	return ok
}

// isRemote says whether g runs on another machine.
func isRemote(g Generator) bool {
	_, ok := g.(*remote.Chat)
	return ok
}

// openRemotes puts the remote roles named in s into m: the remote chat
// model in front of the local one (kept as its fallback), the remote
// embedder instead of a local one, the remote reranker in front of the
// local one (its fallback). A remote that was asked for and cannot
// be set up fails the start, whether from a flag or the settings: a
// silent local answer would hide where the user meant questions to go.
func (a *App) openRemotes(m *models, s Settings) error {
	if s.ChatURL != "" {
		c, err := a.openRemoteChat(s)
		if err != nil {
			return fmt.Errorf("chat: %w", err)
		}
		m.fallback, m.chat = m.chat, c
	}
	if s.EmbedURL != "" {
		e, err := a.openRemoteEmbed(s)
		if err != nil {
			return fmt.Errorf("embedding: %w", err)
		}
		m.embed = e
	}
	if s.RerankURL != "" {
		r, err := a.openRemoteRerank(s)
		if err != nil {
			return fmt.Errorf("rerank: %w", err)
		}
		m.rerankFallback, m.rerank = m.rerank, r
	}
	return nil
}
