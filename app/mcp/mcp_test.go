package mcp_test

// A real app on a fresh data folder (no models: BM25 retrieval and the
// extractive answer) behind the MCP server, and the SDK's own client over
// its in-memory transport. The subprocess over stdio is cmd/lore's test;
// streamable HTTP behind the token is app/server's.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"lore/app"
	"lore/app/mcp"
)

func TestMain(m *testing.M) {
	app.MaybeServeWorker(os.Args) // a parse worker child process serves and exits here
	os.Exit(m.Run())
}

// library is two workspaces and a file beside them that neither holds.
type library struct {
	app               *app.App
	main, other, away string // the folders, and a file outside both
	outDir            string // a folder outside both
	log               *syncBuffer
	session           *sdk.ClientSession
	progress          chan string // the progress messages received
}

func newLibrary(t *testing.T) *library {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	l := &library{main: filepath.Join(dir, "notes"), other: filepath.Join(dir, "private"), away: filepath.Join(dir, "away.txt"),
		outDir: filepath.Join(dir, "elsewhere"), log: &syncBuffer{}, progress: make(chan string, 1024)}
	write(t, filepath.Join(l.main, "lighthouse.md"), "# Lighthouses\n\nThe lighthouse keeper trimmed the wick every night and wound the clockwork.\n")
	write(t, filepath.Join(l.main, "tides.md"), "# Tides\n\nTides rise and fall twice a day because the moon pulls the oceans.\n")
	write(t, filepath.Join(l.main, "bees.txt"), "A honeybee colony has one queen and thousands of workers.\n")
	write(t, filepath.Join(l.main, "sub", "owls.md"), "# Owls\n\nA barn owl hunts by sound in the dark.\n")
	write(t, filepath.Join(l.outDir, "owls.md"), "# Owls\n\nThe secret outside the library.\n")
	write(t, filepath.Join(l.other, "diary.md"), "# Diary\n\nThe combination of the garden shed is four digits.\n")
	write(t, l.away, "not part of any library\n")

	a, err := app.New(ctx, app.Config{DataDir: filepath.Join(dir, "data"), WorkerCmd: []string{os.Args[0], "parse-worker"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	l.app = a
	for ws, folder := range map[string]string{"default": l.main, "private": l.other} {
		if _, err := a.Index(ctx, ws, []string{folder}, nil); err != nil {
			t.Fatalf("index %s: %v", ws, err)
		}
	}

	server := mcp.New(a, mcp.Options{Logger: slog.New(slog.NewTextHandler(l.log, nil))})
	st, ct := sdk.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	client := sdk.NewClient(&sdk.Implementation{Name: "lore-test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			select {
			case l.progress <- r.Params.Message:
			default:
			}
		}})
	if l.session, err = client.Connect(ctx, ct, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.session.Close() })
	return l
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// call calls a tool and returns its result's text and, for a tool that
// did not fail, its structured result decoded into out.
func (l *library) call(t *testing.T, params *sdk.CallToolParams, out any) (text string, failed bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := l.session.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("%s: %v", params.Name, err)
	}
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text += tc.Text
		}
	}
	if !res.IsError && out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: structured result %s: %v", params.Name, b, err)
		}
	}
	return text, res.IsError
}

func TestTools(t *testing.T) {
	l := newLibrary(t)
	ctx := context.Background()

	tools, err := l.session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*sdk.Tool{}
	for _, tool := range tools.Tools {
		got[tool.Name] = tool
	}
	for _, name := range []string{"search", "ask", "list_workspaces", "index_status", "get_passage"} {
		if tool := got[name]; tool == nil || tool.InputSchema == nil || tool.OutputSchema == nil || tool.Description == "" {
			t.Errorf("tool %s: %+v, want it with input and output schemas and a description", name, tool)
		}
	}
	if len(got) != 5 {
		t.Errorf("%d tools, want the 5 read-only ones", len(got))
	}

	var found mcp.SearchResult
	if text, failed := l.call(t, &sdk.CallToolParams{Name: "search", Arguments: map[string]any{"query": "lighthouse keeper", "k": 3}}, &found); failed {
		t.Fatalf("search failed: %s", text)
	}
	if len(found.Passages) == 0 || found.Passages[0].Document != "lighthouse.md" || found.TraceID == "" || found.Passages[0].Scores == nil {
		t.Fatalf("search: %+v, want lighthouse.md first, with scores and a trace id", found)
	}
	top := found.Passages[0]
	if top.Rank != 1 || top.Heading == "" || !strings.HasPrefix(top.URI, "file:///") || found.Passages[0].Scores.BM25 == 0 {
		t.Errorf("top passage %+v: want rank 1, a heading, a file URI and a BM25 score", top)
	}

	var passage mcp.Passage
	if text, failed := l.call(t, &sdk.CallToolParams{Name: "get_passage", Arguments: map[string]any{"chunk_id": top.ChunkID}}, &passage); failed ||
		!strings.Contains(passage.Text, "trimmed the wick") || passage.Path != top.Path {
		t.Errorf("get_passage %d: %+v (%s)", top.ChunkID, passage, text)
	}

	var wss mcp.WorkspacesResult
	l.call(t, &sdk.CallToolParams{Name: "list_workspaces"}, &wss)
	if len(wss.Workspaces) != 2 || wss.Workspaces[0].Documents+wss.Workspaces[1].Documents != 5 {
		t.Errorf("list_workspaces: %+v, want default and private with 5 documents", wss)
	}
	var st mcp.IndexStatusResult
	if text, failed := l.call(t, &sdk.CallToolParams{Name: "index_status", Arguments: map[string]any{"workspace": "private"}}, &st); failed || st.Workspace != "private" {
		t.Errorf("index_status: %+v (%s)", st, text)
	}

	// No chat model: the answer is the extractive fallback, quoting passages.
	var answer mcp.AskResult
	params := &sdk.CallToolParams{Name: "ask", Arguments: map[string]any{"question": "who trims the wick of the lighthouse?"}}
	params.SetProgressToken("ask-1")
	if text, failed := l.call(t, params, &answer); failed {
		t.Fatalf("ask failed: %s", text)
	}
	if answer.Answer == "" || len(answer.Citations) == 0 || answer.TraceID == "" || answer.ChatID == 0 || answer.StagesMs == nil {
		t.Fatalf("ask: %+v, want an answer with citations, a trace and a chat", answer)
	}
	t.Logf("ask: %+v", answer)
	select {
	case <-l.progress:
	case <-time.After(10 * time.Second):
		t.Error("ask with a progress token sent no progress notification")
	}
	tr, err := l.app.Trace(ctx, answer.TraceID)
	if err != nil || tr.Client != "mcp:lore-test" {
		t.Errorf("stored trace %s: client %q (%v), want mcp:lore-test", answer.TraceID, tr.Client, err)
	}
	var again mcp.AskResult
	if text, failed := l.call(t, &sdk.CallToolParams{Name: "ask", Arguments: map[string]any{"question": "and the tides?", "chat_id": answer.ChatID}}, &again); failed || again.ChatID != answer.ChatID {
		t.Errorf("follow-up in chat %d: %+v (%s)", answer.ChatID, again, text)
	}
	if !strings.Contains(l.log.String(), "client=lore-test") || !strings.Contains(l.log.String(), found.TraceID) {
		t.Errorf("log does not name the client and the search's trace id:\n%s", l.log.String())
	}
}

// TestRefusals: bad input is refused with a clear message, before it
// reaches the app.
func TestRefusals(t *testing.T) {
	l := newLibrary(t)
	var found mcp.SearchResult
	l.call(t, &sdk.CallToolParams{Name: "search", Arguments: map[string]any{"query": "garden shed combination", "workspace": "private"}}, &found)
	if len(found.Passages) == 0 {
		t.Fatal("no passage from the private workspace")
	}
	private := found.Passages[0].ChunkID
	long := strings.Repeat("lighthouse ", app.MaxQuestion/10)

	for _, c := range []struct {
		name string
		tool string
		args map[string]any
		want string // in the error's text
	}{
		{"unknown workspace", "search", map[string]any{"query": "tides", "workspace": "nosuch"}, `unknown workspace "nosuch"`},
		{"empty query", "search", map[string]any{"query": "  "}, "empty"},
		{"oversize query", "search", map[string]any{"query": long}, "too long"},
		{"k too large", "search", map[string]any{"query": "tides", "k": 51}, "maximum"},
		{"k negative", "search", map[string]any{"query": "tides", "k": -1}, "minimum"},
		{"unknown field", "search", map[string]any{"query": "tides", "path": "/etc"}, "path"},
		{"oversize question", "ask", map[string]any{"question": long}, "too long"},
		{"ask an unknown workspace", "ask", map[string]any{"question": "tides?", "workspace": "nosuch"}, "unknown workspace"},
		{"ask in a chat of nowhere", "ask", map[string]any{"question": "tides?", "chat_id": 99999}, "not found"},
		{"passage of another workspace", "get_passage", map[string]any{"chunk_id": private}, `not found in workspace "default"`},
		{"passage that is not", "get_passage", map[string]any{"chunk_id": 99999}, "not found"},
		{"passage of an unknown workspace", "get_passage", map[string]any{"chunk_id": private, "workspace": "nosuch"}, "unknown workspace"},
		{"index_status of an unknown workspace", "index_status", map[string]any{"workspace": "nosuch"}, "unknown workspace"},
	} {
		t.Run(c.name, func(t *testing.T) {
			text, failed := l.call(t, &sdk.CallToolParams{Name: c.tool, Arguments: c.args}, nil)
			t.Logf("%.200s", text)
			if !failed || !strings.Contains(text, c.want) {
				t.Errorf("%s %v: failed %v, %q; want a refusal with %q", c.tool, c.args, failed, text, c.want)
			}
		})
	}
}

// TestResources: indexed documents are listed and readable by their file
// URIs; a file that is not an indexed document, or that a symlink now
// takes out of its folder, is refused.
func TestResources(t *testing.T) {
	l := newLibrary(t)
	ctx := context.Background()
	list, err := l.session.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	uris := map[string]bool{}
	for _, r := range list.Resources {
		uris[r.URI] = true
	}
	lighthouse := "file://" + filepath.ToSlash(filepath.Join(l.main, "lighthouse.md"))
	if len(list.Resources) != 5 || !uris[lighthouse] {
		t.Errorf("resources %v, want the 5 documents with %s", uris, lighthouse)
	}
	templates, err := l.session.ListResourceTemplates(ctx, nil)
	if err != nil || len(templates.ResourceTemplates) != 1 {
		t.Errorf("templates %+v (%v), want the document template", templates, err)
	}

	res, err := l.session.ReadResource(ctx, &sdk.ReadResourceParams{URI: lighthouse})
	if err != nil || len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, "lighthouse keeper") ||
		!strings.HasPrefix(res.Contents[0].MIMEType, "text/") {
		t.Fatalf("read %s: %+v (%v)", lighthouse, res, err)
	}

	// tides.md, indexed, becomes a link to the file outside the library;
	// sub/, indexed, a link to a folder outside with an owls.md of its own.
	tides := filepath.Join(l.main, "tides.md")
	if err := os.Remove(tides); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(l.away, tides); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(l.main, "sub")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(l.outDir, filepath.Join(l.main, "sub")); err != nil {
		t.Fatal(err)
	}
	main := "file://" + filepath.ToSlash(l.main)
	const (
		notIndexed = "not an indexed document"
		outside    = "outside the workspace's folders"
		notFound   = "Resource not found"
	)
	for _, c := range []struct{ uri, want string }{
		{"file://" + filepath.ToSlash(l.away), notIndexed},
		{"file:///etc/passwd", notIndexed},
		{main + "/../away.txt", notIndexed},
		{main + "/%2e%2e/away.txt", notIndexed},
		{main + "/%2E%2E%2Faway.txt", notIndexed},
		{main, notIndexed}, // the folder itself
		{main + "/sub", notIndexed},
		{"file://" + filepath.ToSlash(tides), outside},                    // an indexed file, now a link out
		{main + "/sub/owls.md", outside},                                  // an indexed file in a folder now linked out
		{"file://" + filepath.ToSlash(l.outDir) + "/owls.md", notIndexed}, // what that link leads to
		{"lore://nothing", notFound},
		{"file://otherhost/etc/passwd", notFound},
	} {
		res, err := l.session.ReadResource(ctx, &sdk.ReadResourceParams{URI: c.uri})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("read %s: %v (%+v), want a refusal with %q", c.uri, err, res, c.want)
			continue
		}
		t.Logf("%s: %v", c.uri, err)
		// A file that is not a document is the protocol's "resource not found".
		var rpc *jsonrpc.Error
		if c.want == notIndexed && (!errors.As(err, &rpc) || rpc.Code != resourceNotFound) {
			t.Errorf("read %s: %#v, want the code %d", c.uri, err, resourceNotFound)
		}
	}
}

// resourceNotFound is the code of the SDK's "resource not found" error.
var resourceNotFound = sdk.ResourceNotFoundError("").(*jsonrpc.Error).Code

// syncBuffer is a log the server writes from its goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
