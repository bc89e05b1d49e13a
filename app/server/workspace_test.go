package server_test

import (
	"encoding/json"
	"io"
	"net/url"
	"strings"
	"testing"

	"lore/app"
	"lore/app/server"
)

// TestWorkspaceEndpoints: creating, renaming and deleting workspaces answer each
// mistake with its own status and a message that says what to do; chat search
// answers with the chats whose turns hold the words.
func TestWorkspaceEndpoints(t *testing.T) {
	e := newEnv(t, app.Config{}, server.Options{})
	steps := []struct {
		name         string
		method, path string
		body         any
		want         int
		says         string // in the error message
	}{
		{"create", "POST", "/api/workspaces", map[string]string{"name": "notes"}, 200, ""},
		{"create again", "POST", "/api/workspaces", map[string]string{"name": "notes"}, 409, `a workspace called "notes"`},
		{"create empty", "POST", "/api/workspaces", map[string]string{"name": "  "}, 400, "letters, digits, spaces"},
		{"create with a bang", "POST", "/api/workspaces", map[string]string{"name": "My Notes!"}, 400, "letters, digits, spaces"},
		{"create papers", "POST", "/api/workspaces", map[string]string{"name": "papers"}, 200, ""},
		{"rename to a taken name", "PATCH", "/api/workspaces/notes", map[string]string{"name": "papers"}, 409, "already exists"},
		{"rename to a bad name", "PATCH", "/api/workspaces/notes", map[string]string{"name": "a/b"}, 400, "letters, digits, spaces"},
		{"rename the default", "PATCH", "/api/workspaces/default", map[string]string{"name": "main"}, 400, "cannot be renamed or deleted"},
		{"rename unknown", "PATCH", "/api/workspaces/nosuch", map[string]string{"name": "x"}, 404, ""},
		{"rename", "PATCH", "/api/workspaces/notes", map[string]string{"name": "My Notes"}, 200, ""},
		{"the old name is gone", "GET", "/api/workspaces/notes/documents", nil, 404, ""},
		{"rename with a space in the path", "PATCH", "/api/workspaces/" + url.PathEscape("My Notes"), map[string]string{"name": "birds"}, 200, ""},
		{"delete the default", "DELETE", "/api/workspaces/default", nil, 400, "cannot be renamed or deleted"},
		{"delete", "DELETE", "/api/workspaces/birds", nil, 200, ""},
		{"delete again", "DELETE", "/api/workspaces/birds", nil, 404, ""},
		{"search chats without words", "GET", "/api/chats?workspace=default&q=%20", nil, 200, ""},
	}
	for _, st := range steps {
		r := e.req(t, st.method, st.path, st.body)
		var body struct {
			Error string `json:"error"`
		}
		resp, err := e.client.Do(r)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 400 {
			json.Unmarshal(b, &body)
		}
		if resp.StatusCode != st.want || !strings.Contains(body.Error, st.says) {
			t.Errorf("%s: %d %q, want %d saying %q", st.name, resp.StatusCode, body.Error, st.want, st.says)
		}
	}
	var wss []app.WorkspaceInfo
	if code := e.do(t, e.req(t, "GET", "/api/workspaces", nil), &wss); code != 200 {
		t.Fatalf("GET /api/workspaces: %d", code)
	}
	var names []string
	for _, w := range wss {
		names = append(names, w.Name)
	}
	if strings.Join(names, ",") != "default,papers" {
		t.Errorf("workspaces %v, want default and papers", names)
	}

	e.setMaxTokens(t, 8)
	res := e.mustAsk(t, map[string]any{"question": "when does the river market open"})
	var found []app.ChatMatch
	if code := e.do(t, e.req(t, "GET", "/api/chats?workspace=default&q=market", nil), &found); code != 200 ||
		len(found) != 1 || found[0].ID != res.done.ChatID {
		t.Errorf("GET /api/chats?q=market: %d %+v, want chat %d", code, found, res.done.ChatID)
	}
	if code := e.do(t, e.req(t, "GET", "/api/chats?workspace=default&q=orchestra", nil), &found); code != 200 || len(found) != 0 {
		t.Errorf("GET /api/chats?q=orchestra: %d %+v, want none", code, found)
	}
}
