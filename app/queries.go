package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"lore/store"
)

// ErrNotFound, ErrInvalid and ErrExists classify errors for the front doors.
var (
	ErrNotFound = errors.New("not found")
	ErrInvalid  = errors.New("invalid request")
	ErrExists   = errors.New("already exists")
)

// WorkspaceInfo is a workspace with its folders and counts.
type WorkspaceInfo struct {
	ID        int64    `json:"id"`
	Name      string   `json:"name"`
	Folders   []string `json:"folders"`
	Documents int      `json:"documents"`
	Chunks    int      `json:"chunks"`
	Indexing  bool     `json:"indexing"`
	// LastUsed is when a question was last asked in it (absent: never).
	LastUsed *time.Time `json:"last_used,omitempty"`
}

// Workspaces lists workspaces.
func (a *App) Workspaces(ctx context.Context) ([]WorkspaceInfo, error) {
	wss, err := a.db.Workspaces(ctx)
	if err != nil {
		return nil, err
	}
	used, err := a.db.LastUsed(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]WorkspaceInfo, 0, len(wss))
	for _, w := range wss {
		info, err := a.workspaceInfo(ctx, w)
		if err != nil {
			return nil, err
		}
		if t, ok := used[w.ID]; ok {
			info.LastUsed = &t
		}
		c, err := a.db.Counts(ctx, w.ID, "")
		if err != nil {
			return nil, err
		}
		info.Documents = c.Documents[store.StatusIndexed]
		info.Chunks = c.Chunks
		out = append(out, info)
	}
	return out, nil
}

// Workspace finds a workspace by name ("" is the default one) with its
// folders and whether it is indexing, without the counts and last use
// Workspaces adds (they stay zero): a cheap check that it exists.
func (a *App) Workspace(ctx context.Context, name string) (WorkspaceInfo, error) {
	w, err := a.lookup(ctx, name)
	if err != nil {
		return WorkspaceInfo{}, err
	}
	return a.workspaceInfo(ctx, w)
}

// workspaceInfo is w with its folders and indexing state.
func (a *App) workspaceInfo(ctx context.Context, w store.Workspace) (WorkspaceInfo, error) {
	info := WorkspaceInfo{ID: w.ID, Name: w.Name, Folders: []string{}, Indexing: a.jobs.state(w.ID).Running}
	fs, err := a.db.Folders(ctx, w.ID)
	if err != nil {
		return WorkspaceInfo{}, err
	}
	for _, f := range fs {
		info.Folders = append(info.Folders, f.Path)
	}
	return info, nil
}

// CreateWorkspace creates a named workspace (NameRule); a name taken fails
// with ErrExists.
func (a *App) CreateWorkspace(ctx context.Context, name string) (WorkspaceInfo, error) {
	name = strings.TrimSpace(name)
	if err := validName(name); err != nil {
		return WorkspaceInfo{}, err
	}
	w, err := a.db.CreateWorkspace(ctx, name)
	if errors.Is(err, store.ErrExists) {
		return WorkspaceInfo{}, fmt.Errorf("%w: a workspace called %q", ErrExists, name)
	}
	if err != nil {
		return WorkspaceInfo{}, err
	}
	return WorkspaceInfo{ID: w.ID, Name: w.Name, Folders: []string{}}, nil
}

// errDefaultStays refuses to rename or delete the default workspace: the
// commands run without --workspace use it, and it is made again at start.
var errDefaultStays = fmt.Errorf("%w: %q is the workspace commands use when none is named: it cannot be renamed or deleted (remove its folders to empty it)",
	ErrInvalid, DefaultWorkspace)

// RenameWorkspace renames a workspace (NameRule); a name taken fails with
// ErrExists. Its folders, documents, chats and traces stay with it.
func (a *App) RenameWorkspace(ctx context.Context, workspace, name string) (WorkspaceInfo, error) {
	ws, err := a.lookup(ctx, workspace)
	if err != nil {
		return WorkspaceInfo{}, err
	}
	if ws.Name == DefaultWorkspace {
		return WorkspaceInfo{}, errDefaultStays
	}
	name = strings.TrimSpace(name)
	if err := validName(name); err != nil {
		return WorkspaceInfo{}, err
	}
	err = a.db.RenameWorkspace(ctx, ws.ID, name)
	switch {
	case errors.Is(err, store.ErrExists):
		return WorkspaceInfo{}, fmt.Errorf("%w: a workspace called %q", ErrExists, name)
	case err != nil:
		return WorkspaceInfo{}, translate(err, "workspace %q", ws.Name)
	}
	a.jobs.rename(ws.ID, name)
	return WorkspaceInfo{ID: ws.ID, Name: name, Folders: []string{}}, nil
}

// DeleteWorkspace deletes a workspace and everything Lore keeps of it: its
// folders' index, its chats and its traces (the files stay on disk). A run
// indexing it is stopped first.
func (a *App) DeleteWorkspace(ctx context.Context, workspace string) error {
	ws, err := a.lookup(ctx, workspace)
	if err != nil {
		return err
	}
	if ws.Name == DefaultWorkspace {
		return errDefaultStays
	}
	if err := a.jobs.forget(ctx, ws.ID); err != nil {
		return fmt.Errorf("workspace %q: stop indexing: %w", ws.Name, err)
	}
	return translate(a.db.DeleteWorkspace(ctx, ws.ID), "workspace %q", ws.Name)
}

// DocumentInfo is one document's indexing state.
type DocumentInfo struct {
	ID     int64  `json:"id"`
	Path   string `json:"path"`
	Rel    string `json:"rel"`
	Title  string `json:"title,omitempty"` // from its content (a heading, the document's title), else its file name
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	Chunks int    `json:"chunks"`
}

// Documents lists a workspace's documents with their status and errors.
func (a *App) Documents(ctx context.Context, workspace string) ([]DocumentInfo, error) {
	ws, err := a.lookup(ctx, workspace)
	if err != nil {
		return nil, err
	}
	folders, err := a.db.Folders(ctx, ws.ID)
	if err != nil {
		return nil, err
	}
	counts, err := a.db.ChunkCounts(ctx, ws.ID)
	if err != nil {
		return nil, err
	}
	out := []DocumentInfo{}
	for _, f := range folders {
		docs, err := a.db.DocumentsByFolder(ctx, f.ID)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			out = append(out, DocumentInfo{ID: d.ID, Path: d.Path, Rel: d.Rel, Title: d.Title, Status: string(d.Status), Error: d.Error, Chunks: counts[d.ID]})
		}
	}
	return out, nil
}

// Chat is a conversation in a workspace. Questions and Last (the latest
// question) tell apart chats that start alike; a search result has neither.
type Chat struct {
	ID        int64     `json:"id"`
	Title     string    `json:"title"`
	Created   time.Time `json:"created"`
	Updated   time.Time `json:"updated"`
	Questions int       `json:"questions,omitempty"`
	Last      string    `json:"last,omitempty"`
}

// Message is one turn of a chat.
type Message struct {
	Role      string    `json:"role"` // user or assistant
	Content   string    `json:"content"`
	Created   time.Time `json:"created"`
	RequestID string    `json:"request_id,omitempty"` // the trace of an answer
	// An answer's sources as it showed them (their texts as its prompt
	// held them, where the chat kept them), whether the user stopped it,
	// and its stored trace (its timings): what the answer showed live.
	Sources Sources         `json:"sources,omitempty"`
	Stopped bool            `json:"stopped,omitempty"`
	Trace   json.RawMessage `json:"trace,omitempty"`
}

// ChatMatch is a chat found by a search, with a piece of the best matching
// turn ("" when the title matched).
type ChatMatch struct {
	Chat
	Snippet string `json:"snippet,omitempty"`
}

// SearchChats finds a workspace's chats whose title or one of whose turns
// holds every word of query (the last may be unfinished), newest first.
func (a *App) SearchChats(ctx context.Context, workspace, query string) ([]ChatMatch, error) {
	if len(query) > MaxQuestion {
		return nil, fmt.Errorf("%w: search too long (%d bytes, at most %d)", ErrInvalid, len(query), MaxQuestion)
	}
	ws, err := a.lookup(ctx, workspace)
	if err != nil {
		return nil, err
	}
	ms, err := a.db.SearchChats(ctx, ws.ID, query)
	if err != nil {
		return nil, err
	}
	out := make([]ChatMatch, len(ms))
	for i, m := range ms {
		out[i] = ChatMatch{Chat: Chat{ID: m.ID, Title: m.Title, Created: m.Created, Updated: m.Updated}, Snippet: m.Snippet}
	}
	return out, nil
}

// Chats lists a workspace's chats, newest first.
func (a *App) Chats(ctx context.Context, workspace string) ([]Chat, error) {
	ws, err := a.lookup(ctx, workspace)
	if err != nil {
		return nil, err
	}
	cs, err := a.db.Chats(ctx, ws.ID)
	if err != nil {
		return nil, err
	}
	out := make([]Chat, len(cs))
	for i, c := range cs {
		out[i] = Chat{ID: c.ID, Title: c.Title, Created: c.Created, Updated: c.Updated, Questions: c.Questions, Last: c.Last}
	}
	return out, nil
}

// ChatWithMessages is a chat and its turns.
type ChatWithMessages struct {
	ID       int64     `json:"id"`
	Messages []Message `json:"messages"`
}

// Chat returns a chat's turns.
func (a *App) Chat(ctx context.Context, id int64) (ChatWithMessages, error) {
	msgs, err := a.db.Messages(ctx, id)
	if err != nil {
		return ChatWithMessages{}, translate(err, "chat %d", id)
	}
	if len(msgs) == 0 {
		return ChatWithMessages{}, fmt.Errorf("chat %d: %w", id, ErrNotFound)
	}
	out := ChatWithMessages{ID: id, Messages: make([]Message, len(msgs))}
	texts := map[int64]string{} // passages as the questions' prompts held them
	for i, m := range msgs {
		out.Messages[i] = Message{Role: m.Role, Content: m.Content, Created: m.Created, RequestID: m.RequestID, Stopped: m.Stopped}
		for _, p := range storedPassages(m.Passages) {
			texts[p.ChunkID] = p.Text
		}
		if m.Role != "assistant" {
			continue
		}
		if m.Sources != nil {
			var src Sources
			if err := json.Unmarshal(m.Sources, &src); err != nil {
				a.log.Warn("stored sources", "chat", id, "err", err)
			}
			for j := range src {
				src[j].Text = texts[src[j].ChunkID] // "" (the chunk's text is asked for when opened)
			}
			out.Messages[i].Sources = src
		}
		if m.RequestID != "" {
			recs, err := a.db.Traces(ctx, store.TraceFilter{RequestID: m.RequestID, Limit: 1})
			if err != nil {
				return ChatWithMessages{}, err
			}
			if len(recs) == 1 {
				out.Messages[i].Trace = recs[0].JSON
			}
		}
	}
	return out, nil
}

// Chunk returns one passage with its location.
func (a *App) Chunk(ctx context.Context, id int64) (Source, error) {
	h, err := a.chunk(ctx, id)
	if err != nil {
		return Source{}, err
	}
	return chunkSource(h), nil
}

// ChunkIn returns one passage of a workspace ("" the default one) with its
// location: a chunk of another workspace's document is ErrNotFound, as the
// database says, whatever folders the two share on disk.
func (a *App) ChunkIn(ctx context.Context, workspace string, id int64) (Source, error) {
	ws, err := a.lookup(ctx, workspace)
	if err != nil {
		return Source{}, err
	}
	h, err := a.chunk(ctx, id)
	if err != nil {
		return Source{}, err
	}
	doc, err := a.db.Document(ctx, h.DocumentID)
	if err != nil {
		return Source{}, translate(err, "document of chunk %d", id)
	}
	if doc.WorkspaceID != ws.ID {
		return Source{}, fmt.Errorf("chunk %d: %w in workspace %q", id, ErrNotFound, ws.Name)
	}
	return chunkSource(h), nil
}

func (a *App) chunk(ctx context.Context, id int64) (store.Hit, error) {
	hits, err := a.db.ChunkTexts(ctx, []int64{id})
	if err != nil {
		return store.Hit{}, err
	}
	if len(hits) == 0 {
		return store.Hit{}, fmt.Errorf("chunk %d: %w", id, ErrNotFound)
	}
	return hits[0], nil
}

func chunkSource(h store.Hit) Source {
	return Source{ChunkID: h.ChunkID, Document: h.Rel, Path: h.Path, Page: h.Page, Heading: h.Heading,
		LineStart: h.LineStart, LineEnd: h.LineEnd, Text: h.Text}
}

// Traces returns recent traces, newest first.
func (a *App) Traces(ctx context.Context, limit int) ([]json.RawMessage, error) {
	if limit < 1 || limit > 1000 {
		return nil, fmt.Errorf("%w: limit must be 1–1000", ErrInvalid)
	}
	recs, err := a.db.Traces(ctx, store.TraceFilter{Limit: limit})
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.JSON)
	}
	return out, nil
}

// Trace returns one stored trace.
func (a *App) Trace(ctx context.Context, id string) (*Trace, error) {
	recs, err := a.db.Traces(ctx, store.TraceFilter{RequestID: id, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("trace %s: %w", id, ErrNotFound)
	}
	var t Trace
	if err := json.Unmarshal(recs[0].JSON, &t); err != nil {
		return nil, fmt.Errorf("trace %s: %w", id, err)
	}
	return &t, nil
}

// TraceStats is the percentile view the latency panel shows.
type TraceStats struct {
	Window     string                 `json:"window"`
	N          int                    `json:"n"`
	Stages     map[string]Percentiles `json:"stages"`
	ByBucket   map[string]GroupStats  `json:"by_bucket"`
	ByFallback map[string]GroupStats  `json:"by_fallback"`
	// ByPrefetch splits answers by whether their prompt was read while the
	// user typed: hit, miss or none.
	ByPrefetch map[string]GroupStats `json:"by_prefetch"`
	// ByRoute splits answers by the chat model the router picked: main or fast.
	ByRoute       map[string]GroupStats `json:"by_route"`
	TTFTHistogram []HistogramBin        `json:"ttft_histogram"`
	// Caches is how often the retrieval result cache and the query
	// embedding cache answered, over the answers of the window.
	Caches CacheRates `json:"caches"`
	// Support summarises the answers' support scores (Trace.Support).
	Support SupportStats `json:"support"`
}

// SupportStats summarises the support scores of a window's answers, over
// those that have one.
type SupportStats struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"` // 0 with none
	// Low is how many scored under LowSupport; LowRate is their share (0
	// with none).
	Low     int     `json:"low"`
	LowRate float64 `json:"low_rate"`
	sum     float64
}

// LowSupport is the score under which an answer counts as poorly
// supported: fewer than half of its checked sentences are.
const LowSupport = 0.5

func (s *SupportStats) add(score float64) {
	s.N++
	s.sum += score
	if score < LowSupport {
		s.Low++
	}
	s.Mean = round(s.sum / float64(s.N))
	s.LowRate = round(float64(s.Low) / float64(s.N))
}

// CacheRates counts cache lookups and hits. An embedding is looked up only
// when the retrieval cache missed and vectors were searched (or tried).
type CacheRates struct {
	Retrieval HitRate `json:"retrieval"`
	Embedding HitRate `json:"embedding"`
}

// HitRate is hits out of lookups.
type HitRate struct {
	Lookups int     `json:"lookups"`
	Hits    int     `json:"hits"`
	Rate    float64 `json:"rate"` // hits/lookups; 0 with no lookups
}

func (h *HitRate) add(hit bool) {
	h.Lookups++
	if hit {
		h.Hits++
	}
	h.Rate = round(float64(h.Hits) / float64(h.Lookups))
}

// Percentiles of one stage.
type Percentiles = store.Percentiles

// GroupStats are the percentiles of one group of traces.
type GroupStats = store.Stats

// HistogramBin counts traces with TTFT in (previous le, le]; the last has
// le null (no upper bound).
type HistogramBin struct {
	LE    *float64 `json:"le"`
	Count int      `json:"count"`
}

var ttftBins = []float64{100, 250, 500, 1000, 2000, 4000, 8000, 16000}

// Stats computes per-stage percentiles over the traces of a window such as
// "1h", "24h", "7d" or "all".
func (a *App) Stats(ctx context.Context, window string) (TraceStats, error) {
	since, err := windowStart(window)
	if err != nil {
		return TraceStats{}, err
	}
	ss, err := a.db.StageStats(ctx, 0, since)
	if err != nil {
		return TraceStats{}, err
	}
	out := TraceStats{Window: window, N: ss.All.N, Stages: map[string]Percentiles{},
		ByBucket: ss.ByPromptBucket, ByFallback: map[string]GroupStats{}}
	for k, v := range ss.All.Stages {
		out.Stages[k] = v
	}
	for k, v := range ss.ByFallback {
		out.ByFallback[fmt.Sprint(k)] = v
	}
	recs, err := a.db.Traces(ctx, store.TraceFilter{Since: since, Limit: 100000})
	if err != nil {
		return TraceStats{}, err
	}
	counts := make([]int, len(ttftBins)+1)
	type group struct{ ttft, total []float64 }
	prefetch, route := map[string]*group{}, map[string]*group{}
	addTo := func(groups map[string]*group, k string, r store.TraceRecord) {
		if k == "" {
			return
		}
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
		}
		g.ttft, g.total = append(g.ttft, r.TTFTms), append(g.total, r.TotalMs)
	}
	for _, r := range recs {
		var t struct {
			Prefetch          string             `json:"prefetch"`
			RouteRole         string             `json:"route_role"`
			RetrievalCacheHit bool               `json:"retrieval_cache_hit"`
			EmbedCacheHit     bool               `json:"embed_cache_hit"`
			EmbedLookup       bool               `json:"embed_lookup"`
			Support           *float64           `json:"support"`
			Stages            map[string]float64 `json:"stages"`
			Skipped           map[string]string  `json:"skipped_stages"`
		}
		ok := json.Unmarshal(r.JSON, &t) == nil
		_, skipped := t.Skipped[StageRetrieval]
		if _, retrieved := t.Stages[StageRetrieval]; ok && retrieved && !skipped {
			out.Caches.Retrieval.add(t.RetrievalCacheHit)
			if t.EmbedLookup {
				out.Caches.Embedding.add(t.EmbedCacheHit)
			}
		}
		if ok {
			addTo(prefetch, t.Prefetch, r)
			addTo(route, t.RouteRole, r)
			if t.Support != nil {
				out.Support.add(*t.Support)
			}
		}
		i := 0
		for i < len(ttftBins) && r.TTFTms > ttftBins[i] {
			i++
		}
		counts[i]++
	}
	for i, c := range counts {
		bin := HistogramBin{Count: c}
		if i < len(ttftBins) {
			le := ttftBins[i]
			bin.LE = &le
		}
		out.TTFTHistogram = append(out.TTFTHistogram, bin)
	}
	stats := func(groups map[string]*group) map[string]GroupStats {
		out := map[string]GroupStats{}
		for k, g := range groups {
			out[k] = GroupStats{N: len(g.ttft), TTFT: store.Percentile(g.ttft), Total: store.Percentile(g.total), Stages: map[string]Percentiles{}}
		}
		return out
	}
	out.ByPrefetch, out.ByRoute = stats(prefetch), stats(route)
	return out, nil
}

func windowStart(w string) (time.Time, error) {
	switch w {
	case "", "all":
		return time.Time{}, nil
	}
	if d, ok := strings.CutSuffix(w, "d"); ok {
		var n int
		if _, err := fmt.Sscan(d, &n); err == nil && n > 0 {
			return time.Now().Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	d, err := time.ParseDuration(w)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("%w: window %q (use 15m, 1h, 24h, 7d or all)", ErrInvalid, w)
	}
	return time.Now().Add(-d), nil
}
