package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"lore/app"
	"lore/app/server"
)

// bearer adds a token to every request of an MCP client.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// TestMCPHTTP: /mcp speaks MCP over streamable HTTP to a client with the
// full token, and refuses what /api refuses: no token, the /v1-only key, a
// foreign Host or Origin, another site's fetch.
func TestMCPHTTP(t *testing.T) {
	e := newEnv(t, app.Config{}, server.Options{})
	port := fmt.Sprint(e.port)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},` +
		`"clientInfo":{"name":"raw","version":"1"}}}`
	for _, c := range []struct {
		name    string
		auth    string // "-": none
		host    string // "" keeps 127.0.0.1:PORT
		headers map[string]string
		want    int
	}{
		{name: "no token", auth: "-", want: 401},
		{name: "wrong token", auth: "Bearer wrong", want: 401},
		{name: "v1 key", auth: "Bearer " + e.openai, want: 403},
		{name: "foreign origin", headers: map[string]string{"Origin": "http://evil.com"}, want: 403},
		{name: "origin other port", headers: map[string]string{"Origin": "http://127.0.0.1:1"}, want: 403},
		{name: "foreign host", host: "evil.com:" + port, want: 403},
		{name: "cross-site fetch", headers: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: 403},
		{name: "token", want: 200},
		{name: "token, own origin", headers: map[string]string{"Origin": "http://127.0.0.1:" + port}, want: 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.req(t, "POST", "/mcp", initialize)
			r.Header.Set("Accept", "application/json, text/event-stream")
			switch c.auth {
			case "":
			case "-":
				r.Header.Del("Authorization")
			default:
				r.Header.Set("Authorization", c.auth)
			}
			if c.host != "" {
				r.Host = c.host
			}
			for k, v := range c.headers {
				r.Header.Set(k, v)
			}
			if got := e.do(t, r, nil); got != c.want {
				t.Errorf("POST /mcp: %d, want %d", got, c.want)
			}
		})
	}

	// A session's stream (GET) and its end (DELETE) are behind the token
	// too, with a session id or without.
	for _, method := range []string{"GET", "DELETE"} {
		for _, session := range []string{"", "0123456789abcdef"} {
			r := e.req(t, method, "/mcp", nil)
			r.Header.Set("Accept", "text/event-stream")
			r.Header.Del("Authorization")
			if session != "" {
				r.Header.Set("Mcp-Session-Id", session)
			}
			if got := e.do(t, r, nil); got != 401 {
				t.Errorf("%s /mcp without a token (session %q): %d, want 401", method, session, got)
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := sdk.NewClient(&sdk.Implementation{Name: "http-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: e.base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{e.token, e.tr}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 5 {
		t.Fatalf("tools/list: %v (%v), want 5 tools", tools, err)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "search", Arguments: map[string]any{"query": "river market library", "k": 2}})
	if err != nil || res.IsError {
		t.Fatalf("search: %+v (%v)", res, err)
	}
	if text := res.Content[0].(*sdk.TextContent).Text; !strings.Contains(text, "note-") {
		t.Errorf("search found no note: %s", text)
	}
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "search", Arguments: map[string]any{"query": "river", "workspace": "nosuch"}})
	if err != nil || !res.IsError {
		t.Errorf("search an unknown workspace: %+v (%v), want a tool error", res, err)
	}
}
