package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"lore/app"
)

// asLore makes the test binary run its command line as lore does
// (TestMain), for the tests that need `lore` as a child process.
const asLore = "LORE_TEST_AS_LORE"

// loreCommand is `lore args…` as a child process: $LORE_BIN (bin/lore,
// which `make test` builds first) when set, else this test binary
// standing in for it, built from the same source.
func loreCommand(args ...string) *exec.Cmd {
	if bin := os.Getenv("LORE_BIN"); bin != "" {
		return exec.Command(bin, args...)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asLore+"=1")
	return cmd
}

// TestMCPStdio: an MCP client (the SDK's) starts `lore mcp` and speaks
// to it over its stdin and stdout: initialize, the tools with their
// schemas, a search whose best passage is the expected file, an answer
// streamed as progress with its citations, and refusals.
func TestMCPStdio(t *testing.T) {
	dir := t.TempDir()
	chat, embed := filepath.Join(dir, "chat.gguf"), filepath.Join(dir, "embed.gguf")
	data, lib := filepath.Join(dir, "data"), filepath.Join(dir, "lib")
	os.MkdirAll(lib, 0o755)
	for name, text := range map[string]string{
		"lighthouse.md": "# Lighthouses\n\nThe lighthouse keeper trimmed the wick every night and wound the clockwork.\n",
		"tides.md":      "# Tides\n\nTides rise and fall twice a day because the moon pulls the oceans.\n",
		"bees.txt":      "A honeybee colony has one queen and thousands of workers.\n",
	} {
		if err := os.WriteFile(filepath.Join(lib, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"synth-model", "--shape", "tiny", "--out", chat},
		{"synth-model", "--shape", "tiny", "--embedding", "--seed", "2", "--out", embed},
		{"index", "--data", data, "--embed-model", embed, lib},
	} {
		if code, _, errOut := cli(t, args...); code != 0 {
			t.Fatalf("lore %s: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
	}

	// Arguments are refused before stdout is given to the protocol.
	if code, _, errOut := cli(t, "mcp", "--data", data, "serve"); code == 0 || !strings.Contains(errOut, "no arguments") {
		t.Errorf("lore mcp with an argument: exit %d, %q; want a refusal", code, errOut)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := loreCommand("mcp", "--data", data, "--model", chat, "--embed-model", embed)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	var progress sync.Map // message count per progress token: *atomic.Int64
	client := sdk.NewClient(&sdk.Implementation{Name: "stdio-test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			n, _ := progress.LoadOrStore(r.Params.ProgressToken, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		}})
	// A 2025 protocol version: the initialize handshake most clients use.
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v\nstderr: %s", err, stderr)
	}
	defer func() {
		if err := cs.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if !strings.Contains(stderr.String(), "client=stdio-test") {
			t.Errorf("stderr does not log the calls with the client's name:\n%s", stderr)
		}
	}()
	if info := cs.InitializeResult(); info == nil || info.ServerInfo == nil || info.ServerInfo.Name != "lore" || info.ProtocolVersion != "2025-11-25" {
		t.Fatalf("initialize: %+v", info)
	}

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, tool := range tools.Tools {
		var schema struct {
			Type       string         `json:"type"`
			Properties map[string]any `json:"properties"`
		}
		b, _ := json.Marshal(tool.InputSchema)
		if err := json.Unmarshal(b, &schema); err != nil || schema.Type != "object" || tool.OutputSchema == nil {
			t.Errorf("tool %s: input schema %s, output schema %v", tool.Name, b, tool.OutputSchema != nil)
		}
		names = append(names, tool.Name)
	}
	if got := strings.Join(names, " "); got != "ask get_passage index_status list_workspaces search" {
		t.Errorf("tools %q", got)
	}

	call := func(name string, args map[string]any, token any) (text string, structured map[string]any, failed bool) {
		t.Helper()
		p := &sdk.CallToolParams{Name: name, Arguments: args}
		if token != nil {
			p.SetProgressToken(token)
		}
		res, err := cs.CallTool(ctx, p)
		if err != nil {
			t.Fatalf("%s: %v\nstderr: %s", name, err, stderr)
		}
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				text += tc.Text
			}
		}
		structured, _ = res.StructuredContent.(map[string]any)
		return text, structured, res.IsError
	}

	text, found, failed := call("search", map[string]any{"query": "lighthouse keeper", "k": 3}, nil)
	passages, _ := found["passages"].([]any)
	if failed || len(passages) == 0 || found["trace_id"] == "" {
		t.Fatalf("search: %s", text)
	}
	if top := passages[0].(map[string]any); top["document"] != "lighthouse.md" || top["scores"] == nil || top["heading"] != "Lighthouses" {
		t.Errorf("top passage %v, want lighthouse.md with its heading and scores", top)
	}

	text, answer, failed := call("ask", map[string]any{"question": "who trims the wick?"}, "ask-1")
	if failed {
		t.Fatalf("ask: %s", text)
	}
	t.Logf("answer by %v (fallback %v, TTFT %v ms): %.200v", answer["route"], answer["fallback_level"], answer["ttft_ms"], answer["answer"])
	cites, _ := answer["citations"].([]any)
	if answer["answer"] == "" || len(cites) == 0 || answer["ttft_ms"] == nil || answer["trace_id"] == "" {
		t.Errorf("ask: %v, want an answer with citations and its TTFT", answer)
	}
	if n, ok := progress.Load("ask-1"); !ok || n.(*atomic.Int64).Load() == 0 {
		t.Error("the answer streamed no progress notification")
	}

	long := strings.Repeat("x", app.MaxQuestion+1)
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"search", map[string]any{"query": "tides", "workspace": "nosuch"}, "unknown workspace"},
		{"search", map[string]any{"query": long}, "too long"},
		{"ask", map[string]any{"question": long}, "too long"},
		{"get_passage", map[string]any{"chunk_id": 1, "workspace": "nosuch"}, "unknown workspace"},
	} {
		if text, _, failed := call(c.tool, c.args, nil); !failed || !strings.Contains(text, c.want) {
			t.Errorf("%s %.60v: %q, want a refusal with %q", c.tool, c.args, text, c.want)
		}
	}
	for _, path := range []string{chat, "/etc/passwd", lib + "/../chat.gguf"} {
		if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "file://" + filepath.ToSlash(path)}); err == nil ||
			!strings.Contains(err.Error(), "outside") {
			t.Errorf("read %s: %v, want a refusal", path, err)
		}
	}
	res, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "file://" + filepath.ToSlash(filepath.Join(lib, "tides.md"))})
	if err != nil || !strings.Contains(res.Contents[0].Text, "moon pulls") {
		t.Errorf("read tides.md: %v", err)
	}
}

// lockedBuffer collects a child's stderr while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
