package mcp

import (
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"lore/app"
)

func TestFileURIs(t *testing.T) {
	for _, path := range []string{"/notes/a.md", "/notes/with space/ü #1?.md", "/a%20b"} {
		uri := fileURI(path)
		if !strings.HasPrefix(uri, "file:///") {
			t.Errorf("fileURI(%q) = %q", path, uri)
		}
		if got, err := pathOf(uri); err != nil || got != path {
			t.Errorf("pathOf(fileURI(%q)) = %q, %v", path, got, err)
		}
	}
	for _, uri := range []string{"http://x/a", "file://host/etc/passwd", "file:relative", "file:///a?q=1", "file:///a#f", "::"} {
		if p, err := pathOf(uri); err == nil {
			t.Errorf("pathOf(%q) = %q, want an error", uri, p)
		}
	}
	for _, uri := range []string{"file:///notes/../etc/passwd", "file:///notes/%2e%2e/etc/passwd", "file:///notes/%2E%2E%2Fetc/passwd"} {
		if p, err := pathOf(uri); err != nil || p != "/etc/passwd" {
			t.Errorf("pathOf(%s): %q, %v; want it cleaned to /etc/passwd", uri, p, err)
		}
	}
}

func TestChecks(t *testing.T) {
	for _, c := range []struct {
		text string
		ok   bool
	}{
		{"tides", true},
		{"  tides  ", true},
		{"", false},
		{" \n\t", false},
		{"\xff\xfe", false},
		{strings.Repeat("a", app.MaxQuestion), true},
		{strings.Repeat("a", app.MaxQuestion+1), false},
	} {
		if err := app.CheckText("query", strings.TrimSpace(c.text), MaxQuery); (err == nil) != c.ok {
			t.Errorf("CheckText(%.20q): %v, want ok %v", c.text, err, c.ok)
		}
	}
	for k, want := range map[int]int{0: DefaultK, 1: 1, MaxK: MaxK, MaxK + 1: 0, -1: 0} {
		if got, err := checkK(k); got != want || (err == nil) != (want != 0) {
			t.Errorf("checkK(%d) = %d, %v; want %d", k, got, err, want)
		}
	}
}

func TestCitations(t *testing.T) {
	sources := []app.Source{{N: 1, ChunkID: 10, Path: "/l/a.md"}, {N: 2, ChunkID: 20, Path: "/l/b.md"}, {N: 3, ChunkID: 30, Path: "/l/c.md"}}
	got := citations("Tides rise [1]. The moon pulls [1, 3]; see [9].", sources)
	for i, want := range []bool{true, false, true} {
		if got[i].Cited != want || got[i].URI != fileURI(sources[i].Path) {
			t.Errorf("citation %d: %+v, want cited %v", i+1, got[i], want)
		}
	}
}

func TestClientName(t *testing.T) {
	for _, c := range []struct {
		info *sdk.Implementation
		want string
	}{
		{nil, "unknown"},
		{&sdk.Implementation{Name: "claude-code"}, "claude-code"},
		{&sdk.Implementation{Name: " \x1b[31m "}, "[31m"},
		{&sdk.Implementation{Name: strings.Repeat("é", 100)}, strings.Repeat("é", 64)},
	} {
		req := &sdk.InitializeRequest{Params: &sdk.InitializeParams{ClientInfo: c.info}}
		if got := clientName(req); got != c.want {
			t.Errorf("clientName(%+v) = %q, want %q", c.info, got, c.want)
		}
	}
}
