package mcp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"lore/app"
)

// The tools' inputs. Their JSON schemas come from these types (a field's
// jsonschema tag is its description); unknown fields are refused.
type (
	SearchInput struct {
		Query     string `json:"query" jsonschema:"what to look for, in words (at most 8000 bytes)"`
		Workspace string `json:"workspace,omitempty" jsonschema:"the workspace to search (default: the server's, usually default); list_workspaces names them"`
		K         int    `json:"k,omitempty" jsonschema:"how many passages to return, 1 to 50 (default 8)"`
	}
	AskInput struct {
		Question  string `json:"question" jsonschema:"the question, in words (at most 8000 bytes)"`
		Workspace string `json:"workspace,omitempty" jsonschema:"the workspace to answer from (default: the server's, usually default)"`
		ChatID    int64  `json:"chat_id,omitempty" jsonschema:"continue this chat (the chat_id of an earlier ask in the same workspace); omit to start one"`
	}
	WorkspaceInput struct {
		Workspace string `json:"workspace,omitempty" jsonschema:"the workspace (default: the server's, usually default)"`
	}
	PassageInput struct {
		ChunkID   int64  `json:"chunk_id" jsonschema:"a passage's chunk_id, from search or ask"`
		Workspace string `json:"workspace,omitempty" jsonschema:"the workspace the passage belongs to (default: the server's, usually default)"`
	}
	noInput struct{}
)

// The tools' results: each is also the tool's output schema.
type (
	// Passage is a piece of an indexed document. URI opens the whole
	// document as a resource.
	Passage struct {
		Rank      int         `json:"rank,omitempty" jsonschema:"1 is the best match"`
		ChunkID   int64       `json:"chunk_id"`
		Document  string      `json:"document" jsonschema:"the file's path inside its folder"`
		Path      string      `json:"path" jsonschema:"the file's absolute path"`
		URI       string      `json:"uri" jsonschema:"the document as a resource (resources/read)"`
		Heading   string      `json:"heading,omitempty"`
		Page      int         `json:"page,omitempty"`
		LineStart int         `json:"line_start,omitempty"`
		LineEnd   int         `json:"line_end,omitempty"`
		Text      string      `json:"text"`
		Scores    *app.Scores `json:"scores,omitempty" jsonschema:"per retriever: BM25 and vector scores and ranks, the fused score, the reranker's"`
	}
	SearchResult struct {
		TraceID   string             `json:"trace_id" jsonschema:"the id this call is logged and traced under"`
		Workspace string             `json:"workspace"`
		Mode      string             `json:"mode" jsonschema:"hybrid, bm25 or vector"`
		Degraded  string             `json:"degraded,omitempty" jsonschema:"why the search was not hybrid"`
		Passages  []Passage          `json:"passages"`
		StagesMs  map[string]float64 `json:"stages_ms" jsonschema:"time per retrieval stage, in milliseconds"`
	}
	// Citation is a passage an answer was given, numbered as it cites
	// them ([n]); Cited says whether the answer does.
	Citation struct {
		N         int    `json:"n"`
		Cited     bool   `json:"cited"`
		ChunkID   int64  `json:"chunk_id"`
		Document  string `json:"document"`
		Path      string `json:"path"`
		URI       string `json:"uri"`
		Heading   string `json:"heading,omitempty"`
		Page      int    `json:"page,omitempty"`
		LineStart int    `json:"line_start,omitempty"`
		LineEnd   int    `json:"line_end,omitempty"`
	}
	AskResult struct {
		Answer    string     `json:"answer"`
		TraceID   string     `json:"trace_id" jsonschema:"the answer's stored trace (lore traces, GET /api/traces/ID)"`
		ChatID    int64      `json:"chat_id" jsonschema:"pass it back to continue the chat"`
		Citations []Citation `json:"citations"`
		TTFTMs    float64    `json:"ttft_ms" jsonschema:"time to the answer's first token, in milliseconds"`
		TotalMs   float64    `json:"total_ms"`
		// StagesMs is where the time went: queue, embedding, vector
		// search, BM25, rerank, prompt assembly, prefill, first token…
		StagesMs       map[string]float64 `json:"stages_ms"`
		Route          string             `json:"route" jsonschema:"the model that answered"`
		FallbackLevel  int                `json:"fallback_level" jsonschema:"0: a full answer; higher: a stage failed and the answer degraded (the highest: passages only)"`
		FallbackReason string             `json:"fallback_reason,omitempty"`
	}
	WorkspacesResult struct {
		Workspaces []app.WorkspaceInfo `json:"workspaces"`
	}
	IndexStatusResult struct {
		Workspace string      `json:"workspace"`
		Running   bool        `json:"running" jsonschema:"an indexing run is going now"`
		Last      app.Summary `json:"last" jsonschema:"the last run's outcome (zero: none since Lore started)"`
	}
)

var (
	readOnly = &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(false)}
	// ask writes nothing of the library, but keeps the question as a chat.
	asking = &sdk.ToolAnnotations{DestructiveHint: new(false), OpenWorldHint: new(false)}
)

func (l *lore) addTools(s *sdk.Server) {
	sdk.AddTool(s, &sdk.Tool{Name: "search", Title: "Search the library", Annotations: readOnly,
		InputSchema: schema[SearchInput](func(s *jsonschema.Schema) {
			s.Properties["k"].Minimum, s.Properties["k"].Maximum = new(1.0), new(float64(MaxK))
		}),
		Description: "Search the user's indexed documents (hybrid BM25 and vector retrieval) and return the best passages, " +
			"best first, each with its file path, heading, text, scores per retriever and a resource URI for the whole file."},
		l.search)
	sdk.AddTool(s, &sdk.Tool{Name: "ask", Title: "Ask the library", Annotations: asking,
		Description: "Answer a question from the user's indexed documents with the local model: the answer cites its passages as [n] " +
			"(citations lists them), with its time to first token and a stage breakdown. The answer streams as progress " +
			"notifications when the call carries a progress token. The question is kept as a chat in the workspace."},
		l.ask)
	sdk.AddTool(s, &sdk.Tool{Name: "list_workspaces", Title: "List workspaces", Annotations: readOnly,
		Description: "The workspaces (separate libraries): their names, folders, document and passage counts, whether they are indexing."},
		l.listWorkspaces)
	sdk.AddTool(s, &sdk.Tool{Name: "index_status", Title: "Indexing status", Annotations: readOnly,
		Description: "Whether a workspace is being indexed now, and its last indexing run's counts and errors."},
		l.indexStatus)
	sdk.AddTool(s, &sdk.Tool{Name: "get_passage", Title: "Read a passage", Annotations: readOnly,
		Description: "A passage's text and location by its chunk_id (from search or ask), when it belongs to the workspace named."},
		l.getPassage)
}

// schema is T's inferred input schema, adjusted.
func schema[T any](adjust func(*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("schema of %T: %v", *new(T), err)) // a programming error, found by any test
	}
	adjust(s)
	return s
}

func (l *lore) search(ctx context.Context, req *sdk.CallToolRequest, in SearchInput) (*sdk.CallToolResult, SearchResult, error) {
	q := strings.TrimSpace(in.Query)
	if err := app.CheckText("query", q, MaxQuery); err != nil {
		return nil, SearchResult{}, err
	}
	k, err := checkK(in.K)
	if err != nil {
		return nil, SearchResult{}, err
	}
	ws, err := l.workspace(ctx, in.Workspace)
	if err != nil {
		return nil, SearchResult{}, err
	}
	res, err := l.app.Search(ctx, ws.Name, q, app.SearchOptions{TopK: k})
	if err != nil {
		return nil, SearchResult{}, fmt.Errorf("search %q: %w", ws.Name, explain(err))
	}
	out := SearchResult{TraceID: callID(ctx), Workspace: ws.Name, Mode: res.Mode, Degraded: res.Degraded,
		Passages: make([]Passage, len(res.Passages)), StagesMs: res.Stages}
	for i, p := range res.Passages {
		out.Passages[i] = passageOf(p)
		out.Passages[i].Rank = i + 1
	}
	return textResult(searchText(out)), out, nil
}

func (l *lore) ask(ctx context.Context, req *sdk.CallToolRequest, in AskInput) (*sdk.CallToolResult, AskResult, error) {
	q := strings.TrimSpace(in.Question)
	if err := app.CheckText("question", q, MaxQuery); err != nil {
		return nil, AskResult{}, err
	}
	if in.ChatID < 0 {
		return nil, AskResult{}, fmt.Errorf("chat_id %d: a chat id is positive (an earlier ask's chat_id)", in.ChatID)
	}
	ws, err := l.workspace(ctx, in.Workspace)
	if err != nil {
		return nil, AskResult{}, err
	}
	var sources []app.Source
	var answer strings.Builder
	progress := streamer(ctx, req)
	tr, err := l.app.Ask(ctx, app.AskRequest{Question: q, Workspace: ws.Name, ChatID: in.ChatID, RequestID: callID(ctx),
		Received: time.Now(), Client: "mcp:" + clientName(req)}, func(ev app.Event) error {
		switch ev := ev.(type) {
		case app.Sources:
			sources = ev
		case app.Token:
			answer.WriteString(ev.Text)
			progress(ev.Text)
		}
		return nil
	})
	if err != nil {
		return nil, AskResult{}, fmt.Errorf("ask %q: %w", ws.Name, explain(err))
	}
	out := AskResult{Answer: answer.String(), TraceID: tr.RequestID, ChatID: tr.ChatID, Citations: citations(answer.String(), sources),
		TTFTMs: tr.Stages[app.StageTTFT], TotalMs: tr.Stages[app.StageTotal], StagesMs: tr.Stages, Route: tr.Route,
		FallbackLevel: int(tr.FallbackLevel), FallbackReason: tr.FallbackReason}
	return textResult(askText(out)), out, nil
}

// streamer sends each piece of an answer as a progress notification when
// the call asked for progress (a progress token); a client that does not
// read them loses nothing but them.
func streamer(ctx context.Context, req *sdk.CallToolRequest) func(text string) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return func(string) {}
	}
	n := 0
	return func(text string) {
		n++
		req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Progress: float64(n), Message: text})
	}
}

func (l *lore) listWorkspaces(ctx context.Context, _ *sdk.CallToolRequest, _ noInput) (*sdk.CallToolResult, WorkspacesResult, error) {
	wss, err := l.app.Workspaces(ctx)
	if err != nil {
		return nil, WorkspacesResult{}, fmt.Errorf("list workspaces: %w", err)
	}
	return nil, WorkspacesResult{Workspaces: wss}, nil
}

func (l *lore) indexStatus(ctx context.Context, _ *sdk.CallToolRequest, in WorkspaceInput) (*sdk.CallToolResult, IndexStatusResult, error) {
	ws, err := l.workspace(ctx, in.Workspace)
	if err != nil {
		return nil, IndexStatusResult{}, err
	}
	st, err := l.app.IndexStatus(ctx, ws.Name)
	if err != nil {
		return nil, IndexStatusResult{}, fmt.Errorf("index status of %q: %w", ws.Name, err)
	}
	return nil, IndexStatusResult{Workspace: ws.Name, Running: st.Running, Last: st.Last}, nil
}

func (l *lore) getPassage(ctx context.Context, _ *sdk.CallToolRequest, in PassageInput) (*sdk.CallToolResult, Passage, error) {
	if in.ChunkID <= 0 {
		return nil, Passage{}, fmt.Errorf("chunk_id %d: a chunk id is positive (a passage's chunk_id from search or ask)", in.ChunkID)
	}
	ws, err := l.workspace(ctx, in.Workspace)
	if err != nil {
		return nil, Passage{}, err
	}
	// The database says which workspace a passage is of: two workspaces
	// may index the same files.
	src, err := l.app.ChunkIn(ctx, ws.Name, in.ChunkID)
	if err != nil {
		return nil, Passage{}, fmt.Errorf("passage %d: %w", in.ChunkID, explain(err))
	}
	p := passageOf(src)
	p.Scores = nil
	return textResult(p.Text), p, nil
}

// checkK checks a passage count; 0 is the default.
func checkK(k int) (int, error) {
	if k == 0 {
		return DefaultK, nil
	}
	if k < 1 || k > MaxK {
		return 0, fmt.Errorf("k %d: ask for 1 to %d passages", k, MaxK)
	}
	return k, nil
}

// workspace finds a workspace by name ("" is the server's default one),
// listing the names there are when there is none by that name.
func (l *lore) workspace(ctx context.Context, name string) (app.WorkspaceInfo, error) {
	name = cmp.Or(name, l.defaultWS)
	ws, err := l.app.Workspace(ctx, name)
	if !errors.Is(err, app.ErrNotFound) {
		return ws, err
	}
	wss, err := l.app.Workspaces(ctx) // a refusal only: the names to choose from
	if err != nil {
		return app.WorkspaceInfo{}, fmt.Errorf("workspaces: %w", err)
	}
	names := make([]string, len(wss))
	for i, w := range wss {
		names[i] = strconv.Quote(w.Name)
	}
	return app.WorkspaceInfo{}, fmt.Errorf("unknown workspace %q: the workspaces are %s (list_workspaces)", name, strings.Join(names, ", "))
}

// explain words the app's errors that need it for a client.
func explain(err error) error {
	if errors.Is(err, app.ErrBusy) {
		return fmt.Errorf("Lore is busy answering other questions; try again shortly: %w", err)
	}
	return err
}

func passageOf(s app.Source) Passage {
	return Passage{ChunkID: s.ChunkID, Document: s.Document, Path: s.Path, URI: fileURI(s.Path), Heading: s.Heading, Page: s.Page,
		LineStart: s.LineStart, LineEnd: s.LineEnd, Text: s.Text, Scores: &s.Scores}
}

// citeRE finds an answer's citations: [1], [2, 3].
var citeRE = regexp.MustCompile(`\[(\d+(?:\s*,\s*\d+)*)\]`)

// citations are the passages an answer was given, each marked if the
// answer cites it.
func citations(answer string, sources []app.Source) []Citation {
	cited := map[int]bool{}
	for _, m := range citeRE.FindAllStringSubmatch(answer, -1) {
		for _, n := range strings.Split(m[1], ",") {
			if i, err := strconv.Atoi(strings.TrimSpace(n)); err == nil {
				cited[i] = true
			}
		}
	}
	out := make([]Citation, len(sources))
	for i, s := range sources {
		out[i] = Citation{N: s.N, Cited: cited[s.N], ChunkID: s.ChunkID, Document: s.Document, Path: s.Path, URI: fileURI(s.Path),
			Heading: s.Heading, Page: s.Page, LineStart: s.LineStart, LineEnd: s.LineEnd}
	}
	return out
}

func textResult(text string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}
}

// searchText is a search's result as a model reads it best: each passage
// with its place, then its text.
func searchText(r SearchResult) string {
	if len(r.Passages) == 0 {
		return fmt.Sprintf("No passages in workspace %q match.", r.Workspace)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d passages from workspace %q (%s retrieval, trace %s):\n", len(r.Passages), r.Workspace, r.Mode, r.TraceID)
	for _, p := range r.Passages {
		fmt.Fprintf(&b, "\n[%d] %s (chunk %d, bm25 %.3g, vector %.3g)\n%s\n%s\n", p.Rank, where(p.Document, p.Heading), p.ChunkID,
			p.Scores.BM25, p.Scores.Vector, p.URI, p.Text)
	}
	return b.String()
}

// askText is an answer followed by the sources it was given.
func askText(r AskResult) string {
	var b strings.Builder
	b.WriteString(r.Answer)
	if len(r.Citations) > 0 {
		b.WriteString("\n\nSources:")
		for _, c := range r.Citations {
			fmt.Fprintf(&b, "\n[%d] %s (chunk %d) %s", c.N, where(c.Document, c.Heading), c.ChunkID, c.URI)
		}
	}
	fmt.Fprintf(&b, "\n\nFirst token after %.0f ms, done after %.0f ms (trace %s, chat %d).", r.TTFTMs, r.TotalMs, r.TraceID, r.ChatID)
	return b.String()
}

func where(doc, heading string) string {
	if heading == "" {
		return doc
	}
	return doc + " › " + heading
}
