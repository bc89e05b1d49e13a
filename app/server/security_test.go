package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lore/app"
	"lore/app/server"
)

func TestSecurity(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "lore_up 1\n") })
	e := newEnv(t, app.Config{}, server.Options{Metrics: metrics})
	big := `{"question": "` + strings.Repeat("a", server.MaxBody+10) + `"}`
	port := fmt.Sprint(e.port)
	v1 := "Bearer " + e.openai

	cases := []struct {
		name    string
		method  string
		path    string
		body    string
		host    string // "" keeps 127.0.0.1:PORT
		auth    string // Authorization header; "-" none
		cookie  string // lore_token cookie value
		headers map[string]string
		want    int
		oa      bool // the error body is OpenAI's {"error": {"message", …}}
	}{
		{name: "no token", method: "GET", path: "/api/workspaces", auth: "-", want: 401},
		{name: "wrong token", method: "GET", path: "/api/workspaces", auth: "Bearer wrong", want: 401},
		{name: "token prefix", method: "GET", path: "/api/workspaces", auth: "Bearer " + e.token[:len(e.token)-1], want: 401},
		{name: "token without Bearer", method: "GET", path: "/api/workspaces", auth: e.token, want: 401},
		{name: "token in query is not auth", method: "GET", path: "/api/workspaces?token=" + e.token, auth: "-", want: 401},
		{name: "wrong cookie", method: "GET", path: "/api/workspaces", auth: "-", cookie: "nope", want: 401},
		{name: "bearer token", method: "GET", path: "/api/workspaces", want: 200},
		// Cookies are sent to every port of 127.0.0.1: they are no credential.
		{name: "cookie is not a credential", method: "GET", path: "/api/workspaces", auth: "-", cookie: e.token, want: 401},
		{name: "cookie on ask", method: "POST", path: "/api/ask", body: `{"question":"river"}`, auth: "-", cookie: e.token, want: 401},
		{name: "v1 needs token", method: "GET", path: "/v1/models", auth: "-", want: 401, oa: true},
		{name: "v1 with token", method: "GET", path: "/v1/models", want: 200},
		{name: "ask needs token", method: "POST", path: "/api/ask", body: `{"question":"river"}`, auth: "-", want: 401},

		// DNS rebinding: a valid token does not help with a foreign Host.
		{name: "host evil.com", method: "GET", path: "/api/workspaces", host: "evil.com:" + port, want: 403},
		{name: "host nip.io", method: "GET", path: "/api/workspaces", host: "127.0.0.1.nip.io:" + port, want: 403},
		{name: "host rebinding name", method: "GET", path: "/api/workspaces", host: "a9fe0001.7f000001.rbndr.us:" + port, want: 403},
		{name: "host without port", method: "GET", path: "/api/workspaces", host: "127.0.0.1", want: 403},
		{name: "host other port", method: "GET", path: "/api/workspaces", host: "localhost:1", want: 403},
		{name: "host localhost. (FQDN)", method: "GET", path: "/api/workspaces", host: "localhost.:" + port, want: 403},
		{name: "host 0.0.0.0", method: "GET", path: "/api/workspaces", host: "0.0.0.0:" + port, want: 403},
		{name: "host localhost ok", method: "GET", path: "/api/workspaces", host: "localhost:" + port, want: 200},
		{name: "host [::1] ok", method: "GET", path: "/api/workspaces", host: "[::1]:" + port, want: 200},
		{name: "foreign host on UI", method: "GET", path: "/", host: "evil.com:" + port, auth: "-", want: 403},
		{name: "foreign host on token URL", method: "GET", path: "/?token=" + e.token, host: "evil.com:" + port, auth: "-", want: 403},
		{name: "foreign host on ask", method: "POST", path: "/api/ask", body: `{"question":"river"}`, host: "evil.com:" + port, want: 403},
		{name: "foreign host on cancel", method: "POST", path: "/api/ask/x/cancel", host: "evil.com:" + port, want: 403},

		{name: "foreign origin", method: "GET", path: "/api/workspaces", headers: map[string]string{"Origin": "http://evil.com"}, want: 403},
		{name: "null origin", method: "POST", path: "/api/workspaces", body: `{"name":"x"}`, headers: map[string]string{"Origin": "null"}, want: 403},
		{name: "origin other port", method: "GET", path: "/api/workspaces", headers: map[string]string{"Origin": "http://127.0.0.1:1"}, want: 403},
		{name: "origin https", method: "GET", path: "/api/workspaces", headers: map[string]string{"Origin": "https://127.0.0.1:" + port}, want: 403},
		{name: "own origin", method: "GET", path: "/api/workspaces", headers: map[string]string{"Origin": "http://127.0.0.1:" + port}, want: 200},
		{name: "cross-site fetch", method: "GET", path: "/api/workspaces", headers: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: 403},
		{name: "cross-site form to ask", method: "POST", path: "/api/ask", body: `{"question":"river"}`, auth: "-", cookie: e.token,
			headers: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: 403},
		{name: "same-origin fetch", method: "GET", path: "/api/workspaces", headers: map[string]string{"Sec-Fetch-Site": "same-origin"}, want: 200},
		{name: "typed address", method: "GET", path: "/api/workspaces", headers: map[string]string{"Sec-Fetch-Site": "none"}, want: 200},
		// Another port of 127.0.0.1 is "same-site": refused even with the token.
		{name: "same-site fetch with token", method: "GET", path: "/api/workspaces", headers: map[string]string{"Sec-Fetch-Site": "same-site"}, want: 403},
		{name: "same-site ask with cookie", method: "POST", path: "/api/ask", body: `{"question":"river"}`, auth: "-", cookie: e.token,
			headers: map[string]string{"Sec-Fetch-Site": "same-site"}, want: 403},
		{name: "same-site v1", method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"river"}]}`,
			headers: map[string]string{"Sec-Fetch-Site": "same-site"}, want: 403},
		{name: "unknown Sec-Fetch-Site", method: "GET", path: "/api/workspaces", headers: map[string]string{"Sec-Fetch-Site": "nonsense"}, want: 403},

		// The /v1-only key: the OpenAI-compatible endpoints and nothing else.
		{name: "v1 key: models", method: "GET", path: "/v1/models", auth: v1, want: 200},
		{name: "v1 key: bad completion", method: "POST", path: "/v1/chat/completions", body: `{"messages":[]}`, auth: v1, want: 400, oa: true},
		{name: "v1 key: add /etc", method: "POST", path: "/api/workspaces/default/folders", body: `{"path":"/etc"}`, auth: v1, want: 403},
		{name: "v1 key: remove folder", method: "DELETE", path: "/api/workspaces/default/folders?path=/x", auth: v1, want: 403},
		{name: "v1 key: reindex", method: "POST", path: "/api/workspaces/default/index", auth: v1, want: 403},
		{name: "v1 key: new workspace", method: "POST", path: "/api/workspaces", body: `{"name":"x"}`, auth: v1, want: 403},
		{name: "v1 key: workspaces", method: "GET", path: "/api/workspaces", auth: v1, want: 403},
		{name: "v1 key: rename workspace", method: "PATCH", path: "/api/workspaces/default", body: `{"name":"x"}`, auth: v1, want: 403},
		{name: "v1 key: delete workspace", method: "DELETE", path: "/api/workspaces/default", auth: v1, want: 403},
		{name: "v1 key: search chats", method: "GET", path: "/api/chats?workspace=default&q=river", auth: v1, want: 403},
		{name: "no token: delete workspace", method: "DELETE", path: "/api/workspaces/default", auth: "-", want: 401},
		{name: "no token: rename workspace", method: "PATCH", path: "/api/workspaces/default", body: `{"name":"x"}`, auth: "-", want: 401},
		{name: "foreign origin: delete workspace", method: "DELETE", path: "/api/workspaces/default", headers: map[string]string{"Origin": "http://evil.com"}, want: 403},
		{name: "host evil.com: rename workspace", method: "PATCH", path: "/api/workspaces/default", body: `{"name":"x"}`, host: "evil.com:" + port, want: 403},
		{name: "v1 key: chunk", method: "GET", path: "/api/chunks/1", auth: v1, want: 403},
		{name: "v1 key: chats", method: "GET", path: "/api/chats?workspace=default", auth: v1, want: 403},
		{name: "v1 key: traces", method: "GET", path: "/api/traces", auth: v1, want: 403},
		{name: "v1 key: settings", method: "PUT", path: "/api/settings", body: `{"max_tokens":8}`, auth: v1, want: 403},
		{name: "v1 key: ask", method: "POST", path: "/api/ask", body: `{"question":"river"}`, auth: v1, want: 403},
		{name: "v1 key: metrics", method: "GET", path: "/metrics", auth: v1, want: 403},
		{name: "no token: read-ahead events", method: "GET", path: "/api/prefetch/events", auth: "-", want: 401},
		{name: "v1 key: read-ahead events", method: "GET", path: "/api/prefetch/events", auth: v1, want: 403},
		{name: "foreign origin: read-ahead events", method: "GET", path: "/api/prefetch/events", headers: map[string]string{"Origin": "http://evil.com"}, want: 403},
		{name: "metrics with token", method: "GET", path: "/metrics", want: 200},

		// Reads create nothing, and settings hold their ranges.
		{name: "chats of ../../etc", method: "GET", path: "/api/chats?workspace=../../etc", want: 404},
		{name: "progress of unknown", method: "GET", path: "/api/workspaces/nosuch/progress", want: 404},
		{name: "documents of unknown", method: "GET", path: "/api/workspaces/nosuch/documents", want: 404},
		{name: "workspace name with slash", method: "POST", path: "/api/workspaces", body: `{"name":"../../etc"}`, want: 400},
		{name: "rename to a slash", method: "PATCH", path: "/api/workspaces/nosuch", body: `{"name":"../../etc"}`, want: 404},
		{name: "search chats of unknown", method: "GET", path: "/api/chats?workspace=nosuch&q=river", want: 404},
		{name: "delete the default workspace", method: "DELETE", path: "/api/workspaces/default", want: 400},
		{name: "settings: max_tokens 2e9", method: "PUT", path: "/api/settings", body: `{"max_tokens":2000000000}`, want: 400},
		{name: "settings: rerank_budget_ms -5", method: "PUT", path: "/api/settings", body: `{"rerank_budget_ms":-5}`, want: 400},
		{name: "settings: gpu_layers 99999999", method: "PUT", path: "/api/settings", body: `{"gpu_layers":99999999}`, want: 400},
		{name: "settings: top_k 0", method: "PUT", path: "/api/settings", body: `{"top_k":0}`, want: 400},
		{name: "settings: threads -1", method: "PUT", path: "/api/settings", body: `{"threads":-1}`, want: 400},
		{name: "settings: model outside the machine's", method: "PUT", path: "/api/settings", body: `{"chat_model":"/etc/passwd"}`, want: 400},
		// Remote URLs: http(s) with a host, never credentials (the key is not a setting).
		{name: "settings: chat_url with credentials", method: "PUT", path: "/api/settings", body: `{"chat_url":"http://u:secret@gpu:8080/v1"}`, want: 400},
		{name: "settings: embed_url not http", method: "PUT", path: "/api/settings", body: `{"embed_url":"file:///etc/passwd"}`, want: 400},
		{name: "settings: rerank_url with credentials", method: "PUT", path: "/api/settings", body: `{"rerank_url":"https://key@gpu/v1"}`, want: 400},
		{name: "settings: rerank_url without host", method: "PUT", path: "/api/settings", body: `{"rerank_url":"http:///v1"}`, want: 400},
		{name: "settings: rerank_url not a URL", method: "PUT", path: "/api/settings", body: `{"rerank_url":"gpu box"}`, want: 400},

		{name: "body over 1 MiB: ask", method: "POST", path: "/api/ask", body: big, want: 413},
		{name: "body over 1 MiB: settings", method: "PUT", path: "/api/settings", body: `{"chat_model": "` + strings.Repeat("m", server.MaxBody) + `"}`, want: 413},
		{name: "body over 1 MiB: openai", method: "POST", path: "/v1/chat/completions",
			body: `{"model":"lore","messages":[{"role":"user","content":"` + strings.Repeat("a", server.MaxBody) + `"}]}`, want: 413, oa: true},
		{name: "header over cap", method: "GET", path: "/api/workspaces", headers: map[string]string{"X-Big": strings.Repeat("h", 64<<10)}, want: 431},
		{name: "bad json", method: "POST", path: "/api/ask", body: `{"question":`, want: 400},
		{name: "unknown field", method: "POST", path: "/api/ask", body: `{"question":"river","bogus":1}`, want: 400},
		{name: "cancel unknown request", method: "POST", path: "/api/ask/nosuch/cancel", want: 404},
		{name: "unknown api path", method: "GET", path: "/api/nosuch", want: 404},
		{name: "wrong method on api path", method: "GET", path: "/api/ask", want: 404},
		{name: "unknown v1 path", method: "GET", path: "/v1/nosuch", want: 404},

		// Embeddings and rerank: the same checks as every route.
		{name: "v1 key: embeddings", method: "POST", path: "/v1/embeddings", body: `{"input":"river"}`, auth: v1, want: 200},
		{name: "embeddings need a token", method: "POST", path: "/v1/embeddings", body: `{"input":"river"}`, auth: "-", want: 401, oa: true},
		{name: "embeddings, wrong token", method: "POST", path: "/v1/embeddings", body: `{"input":"river"}`, auth: "Bearer wrong", want: 401, oa: true},
		{name: "foreign host on embeddings", method: "POST", path: "/v1/embeddings", body: `{"input":"river"}`, host: "evil.com:" + port, want: 403},
		{name: "same-site embeddings", method: "POST", path: "/v1/embeddings", body: `{"input":"river"}`,
			headers: map[string]string{"Sec-Fetch-Site": "same-site"}, want: 403},
		{name: "foreign origin on rerank", method: "POST", path: "/v1/rerank", body: `{"query":"q","documents":["a"]}`,
			headers: map[string]string{"Origin": "http://evil.com"}, want: 403},
		{name: "rerank needs a token", method: "POST", path: "/v1/rerank", body: `{"query":"q","documents":["a"]}`, auth: "-", want: 401, oa: true},
		{name: "v1 key: rerank, no rerank model", method: "POST", path: "/v1/rerank", body: `{"query":"q","documents":["a"]}`, auth: v1, want: 404, oa: true},
		{name: "body over 1 MiB: embeddings", method: "POST", path: "/v1/embeddings",
			body: `{"input":"` + strings.Repeat("a", server.MaxBody) + `"}`, want: 413, oa: true},
	}
	chatsBefore := countChats(t, e)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body io.Reader
			if c.body != "" {
				body = strings.NewReader(c.body)
			}
			r, err := http.NewRequest(c.method, e.base+c.path, body)
			if err != nil {
				t.Fatal(err)
			}
			switch c.auth {
			case "":
				r.Header.Set("Authorization", "Bearer "+e.token)
			case "-":
			default:
				r.Header.Set("Authorization", c.auth)
			}
			if c.cookie != "" {
				r.AddCookie(&http.Cookie{Name: "lore_token", Value: c.cookie})
			}
			if c.host != "" {
				r.Host = c.host
			}
			for k, v := range c.headers {
				r.Header.Set(k, v)
			}
			resp, err := e.client.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.want {
				t.Fatalf("status %d, want %d; body %.200q", resp.StatusCode, c.want, b)
			}
			if c.want >= 400 && c.want != 431 && c.oa {
				var eb struct {
					Error struct{ Message, Type string }
				}
				if err := json.Unmarshal(b, &eb); err != nil || eb.Error.Message == "" || eb.Error.Type == "" {
					t.Errorf("error body is not OpenAI's {\"error\": {\"message\", \"type\"}}: %.200q", b)
				}
			} else if c.want >= 400 && c.want != 431 {
				var eb struct{ Error string }
				if err := json.Unmarshal(b, &eb); err != nil || eb.Error == "" {
					t.Errorf("error body is not {\"error\": …}: %.200q", b)
				}
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("error Content-Type %q", ct)
				}
			}
			if resp.StatusCode == 403 || resp.StatusCode == 401 {
				if sc := resp.Header.Get("Set-Cookie"); sc != "" {
					t.Errorf("refused request set a cookie: %s", sc)
				}
			}
		})
	}
	// The refused asks (foreign host, cross-site, no token, too big) never
	// reached the handler: no chat was created for them.
	if after := countChats(t, e); after != chatsBefore {
		t.Errorf("refused asks created chats: %d → %d", chatsBefore, after)
	}
	// Nothing above created a workspace, added a folder or changed a setting.
	var wss []app.WorkspaceInfo
	if code := e.do(t, e.req(t, "GET", "/api/workspaces", nil), &wss); code != 200 || len(wss) != 1 || wss[0].Name != "default" {
		t.Errorf("workspaces after the refused requests: %d %+v", code, wss)
	}
	for _, ws := range wss {
		for _, f := range ws.Folders {
			if f == "/etc" || f == "/x" {
				t.Errorf("workspace %s got folder %s", ws.Name, f)
			}
		}
	}
	var set app.Settings
	if code := e.do(t, e.req(t, "GET", "/api/settings", nil), &set); code != 200 || set.MaxTokens == 8 || set.MaxTokens > 32768 || set.RerankBudgetMs < 0 || set.GPULayers > 1024 {
		t.Errorf("settings after the refused PUTs: %d %+v", code, set)
	}

	t.Run("token URL redirects to the fragment, sets no cookie", func(t *testing.T) {
		r, _ := http.NewRequest("GET", e.base+"/?token="+e.token, nil)
		resp, err := e.client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/#token="+e.token {
			t.Fatalf("status %d Location %q, want 303 to /#token=…", resp.StatusCode, resp.Header.Get("Location"))
		}
		if sc := resp.Header.Values("Set-Cookie"); len(sc) != 0 {
			t.Errorf("login set a cookie (sent to every port of the host): %v", sc)
		}
		// Wrong tokens, the /v1 key among them, log nothing in.
		for _, tok := range []string{"wrong", e.openai} {
			r, _ = http.NewRequest("GET", e.base+"/?token="+tok, nil)
			resp, err = e.client.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 401 || len(resp.Cookies()) != 0 || resp.Header.Get("Location") != "" {
				t.Errorf("token URL with %.12s…: %d, cookies %v, Location %q", tok, resp.StatusCode, resp.Cookies(), resp.Header.Get("Location"))
			}
		}
	})

	t.Run("an old login cookie is expired", func(t *testing.T) {
		r, _ := http.NewRequest("GET", e.base+"/", nil)
		r.AddCookie(&http.Cookie{Name: "lore_token", Value: e.token})
		resp, err := e.client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var ck *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == "lore_token" {
				ck = c
			}
		}
		if ck == nil || ck.MaxAge >= 0 || ck.Value != "" {
			t.Errorf("lore_token cookie not expired: %+v", ck)
		}
	})

	t.Run("printed URL", func(t *testing.T) {
		s := server.New(e.app, e.token, e.ln, server.Options{})
		u := s.URL(e.ln)
		if want := e.base + "/#token=" + e.token; u != want {
			t.Errorf("URL %q, want %q (the token in the fragment, never sent to the server)", u, want)
		}
	})

	t.Run("UI headers", func(t *testing.T) {
		resp, err := e.client.Get(e.base + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for k, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"} {
			if got := resp.Header.Get(k); got != want {
				t.Errorf("%s: %q, want %q", k, got, want)
			}
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("CSP %q", csp)
		}
	})

	t.Run("empty token authorises nothing", func(t *testing.T) {
		ln, err := server.Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := server.New(e.app, "", ln, server.Options{})
		ln.Close()
		for _, auth := range []string{"", "Bearer ", "Bearer x"} {
			r, _ := http.NewRequest("GET", "/api/workspaces", nil)
			r.Host = ln.Addr().String()
			if auth != "" {
				r.Header.Set("Authorization", auth)
			}
			w := &recorder{h: http.Header{}}
			s.Handler().ServeHTTP(w, r)
			if w.code != 401 {
				t.Errorf("Authorization %q on a server with no token: %d, want 401", auth, w.code)
			}
		}
	})
}

// recorder is a minimal ResponseWriter (httptest is avoided on purpose:
// everything else here goes through real sockets).
type recorder struct {
	h    http.Header
	code int
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = 200
	}
	return len(b), nil
}
func (r *recorder) WriteHeader(c int) {
	if r.code == 0 {
		r.code = c
	}
}

func countChats(t *testing.T, e *env) int {
	t.Helper()
	var chats []json.RawMessage
	if code := e.do(t, e.req(t, "GET", "/api/chats?workspace=default", nil), &chats); code != 200 {
		t.Fatalf("GET /api/chats: %d", code)
	}
	return len(chats)
}

func TestListenLoopbackOnly(t *testing.T) {
	lan := "192.168.1.20"
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
				lan = ipn.IP.String() // a real address of this machine
				break
			}
		}
	}
	cases := []struct {
		addr string
		ok   bool
	}{
		{"0.0.0.0:0", false},
		{"[::]:0", false},
		{":0", false},
		{lan + ":0", false},
		{"example.com:0", false},
		{"127.0.0.1", false}, // no port
		{"127.0.0.1:0", true},
		{"localhost:0", true},
	}
	for _, c := range cases {
		t.Run(c.addr, func(t *testing.T) {
			ln, err := server.Listen(c.addr)
			if ln != nil {
				ip := ln.Addr().(*net.TCPAddr).IP
				ln.Close()
				if !ip.IsLoopback() {
					t.Fatalf("bound %s", ip)
				}
			}
			if (err == nil) != c.ok {
				t.Fatalf("Listen(%q): err %v, want ok=%v", c.addr, err, c.ok)
			}
		})
	}
}

func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	tok, err := server.LoadToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "token")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", st.Mode().Perm())
	}
	if len(tok) < 32 {
		t.Errorf("token %q shorter than 32 characters", tok)
	}
	again, err := server.LoadToken(dir)
	if err != nil || again != tok {
		t.Errorf("second LoadToken: %q, %v; want the same token", again, err)
	}
	// A token file that became readable by others is tightened again.
	os.Chmod(path, 0o644)
	if _, err := server.LoadToken(dir); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("after LoadToken the file is %v, want 0600", st.Mode().Perm())
	}
	// A short (tampered) token is replaced.
	os.WriteFile(path, []byte("short\n"), 0o600)
	if tok2, err := server.LoadToken(dir); err != nil || len(tok2) < 32 || tok2 == tok {
		t.Errorf("short token file: got %q, %v", tok2, err)
	}
	// Replacing a short token in a file others can read leaves it 0600.
	os.Chmod(path, 0o644)
	os.WriteFile(path, []byte("short\n"), 0o644)
	if _, err := server.LoadToken(dir); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("after replacing a short token the file is %v, want 0600", st.Mode().Perm())
	}
	// Two fresh data folders get different tokens.
	other, _ := server.LoadToken(t.TempDir())
	if other == tok {
		t.Error("two data folders got the same token")
	}
}

// TestTokenRotation: every serve gets a fresh full token unless pinned;
// the /v1 key is kept across runs and told apart from the full token.
func TestTokenRotation(t *testing.T) {
	dir := t.TempDir()
	mode := func(name string) os.FileMode {
		t.Helper()
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return st.Mode().Perm()
	}
	seen := map[string]bool{}
	var last string
	for range 3 {
		tok, err := server.RotateToken(dir)
		if err != nil {
			t.Fatal(err)
		}
		if seen[tok] || len(tok) < server.MinTokenLen {
			t.Fatalf("RotateToken gave %q again or too short", tok)
		}
		seen[tok], last = true, tok
		if m := mode(server.TokenFile); m != 0o600 {
			t.Errorf("token file %v after rotation, want 0600", m)
		}
	}
	// --keep-token reuses the last one.
	if kept, err := server.LoadToken(dir); err != nil || kept != last {
		t.Errorf("LoadToken after rotation: %q, %v; want the last rotated %q", kept, err, last)
	}
	// $LORE_TOKEN pins one; short or spaced values are refused.
	pinned := strings.Repeat("p", server.MinTokenLen)
	if err := server.SaveToken(dir, pinned); err != nil {
		t.Fatal(err)
	}
	if kept, _ := server.LoadToken(dir); kept != pinned {
		t.Errorf("after SaveToken the file holds %q", kept)
	}
	for _, bad := range []string{"short", strings.Repeat("a", 40) + " b", strings.Repeat("é", 40)} {
		if err := server.SaveToken(dir, bad); err == nil {
			t.Errorf("SaveToken(%q) accepted", bad)
		}
	}
	// The /v1 key: stable, 0600, not the full token, distinguishable.
	k1, err := server.LoadOpenAIToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.RotateToken(dir); err != nil {
		t.Fatal(err)
	}
	k2, err := server.LoadOpenAIToken(dir)
	if err != nil || k2 != k1 {
		t.Errorf("the /v1 key changed across runs: %q → %q (%v)", k1, k2, err)
	}
	if !strings.HasPrefix(k1, "lore-v1-") || len(k1) < server.MinTokenLen || k1 == last {
		t.Errorf("/v1 key %q", k1)
	}
	if m := mode(server.OpenAITokenFile); m != 0o600 {
		t.Errorf("/v1 key file %v, want 0600", m)
	}
	// Deleting the file rotates it.
	os.Remove(filepath.Join(dir, server.OpenAITokenFile))
	if k3, _ := server.LoadOpenAIToken(dir); k3 == k1 || k3 == "" {
		t.Errorf("after deleting the file the /v1 key is %q", k3)
	}
}
