// Package server is Lore's local HTTP API and web UI. It binds loopback,
// and every request passes an exact Host allowlist, an Origin and
// Sec-Fetch-Site check and a bearer token check before any handler runs.
//
// Credentials are bearer tokens only, never cookies: browsers send a
// cookie for 127.0.0.1 to every port of it, so any other local service
// the user visits would receive it. The UI gets its token from the URL's
// fragment and keeps it in sessionStorage, which is per origin (port
// included). Two tokens exist: the full one, which rotates with every
// `lore serve`, and the OpenAI-compatible one, which grants /v1/* only.
package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"lore/app"
	"lore/app/mcp"
)

// MaxBody bounds request bodies.
const MaxBody = 1 << 20

// Defaults for Options' zero values.
const (
	DefaultReadTimeout        = 30 * time.Second
	DefaultMaxProgressStreams = 16
)

// Server serves the API and the UI for one App.
type Server struct {
	app    *app.App
	token  string // full access
	openai string // /v1/* only; "" when none was issued
	ui     fs.FS  // the built frontend; nil serves a notice
	// hosts are the exact Host header values accepted; origins likewise.
	hosts   map[string]bool
	origins map[string]bool
	metrics http.Handler
	mcp     http.Handler // the MCP server, streamable HTTP

	readTimeout time.Duration
	maxProgress int64
	progressN   atomic.Int64 // progress streams open now
}

// Options configures a Server.
type Options struct {
	UI      fs.FS
	Metrics http.Handler // /metrics; nil: 404
	// OpenAIToken, when set, is a second token that grants the
	// OpenAI-compatible endpoints (POST /v1/chat/completions,
	// /v1/embeddings, /v1/rerank, GET /v1/models) and nothing else, for
	// clients that cannot be trusted with the library (see
	// LoadOpenAIToken). Embeddings and rerank run the local models on the
	// caller's text; they read nothing from the library.
	OpenAIToken string
	// ReadTimeout bounds reading one request, headers and body (default
	// DefaultReadTimeout); a client that sends slower is cut off. Streamed
	// replies are not bounded by it.
	ReadTimeout time.Duration
	// MaxProgressStreams caps the event streams open at once: indexing
	// progress over all workspaces and read-ahead status (default
	// DefaultMaxProgressStreams); beyond it a subscription gets 429.
	MaxProgressStreams int
	// Tracer spans the MCP calls (/mcp); nil: none.
	Tracer trace.Tracer
	// Workspace is the one an MCP call means when it names none (default
	// app.DefaultWorkspace); Version is the one MCP clients are told.
	Workspace, Version string
}

// Token files in the data folder, each readable by the user alone.
const (
	TokenFile       = "token"        // the full token of the running `lore serve`
	OpenAITokenFile = "openai-token" // the /v1-only token; kept across runs
)

// MinTokenLen is the shortest token accepted from a file or the
// environment.
const MinTokenLen = 32

// LoadToken returns the full token saved in the data folder, creating one
// on first use. `lore serve --keep-token` uses it; RotateToken is the
// default.
func LoadToken(dataDir string) (string, error) {
	return loadOrCreate(filepath.Join(dataDir, TokenFile), "")
}

// RotateToken creates a fresh full token and saves it in the data folder
// (replacing the previous one), so a token seen once stops working when
// the server restarts.
func RotateToken(dataDir string) (string, error) {
	t, err := newToken("")
	if err != nil {
		return "", err
	}
	return t, saveToken(filepath.Join(dataDir, TokenFile), t)
}

// SaveToken saves a token chosen by the user ($LORE_TOKEN) as the full
// token.
func SaveToken(dataDir, token string) error {
	if len(token) < MinTokenLen || strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return fmt.Errorf("token: want at least %d printable ASCII characters without spaces", MinTokenLen)
	}
	return saveToken(filepath.Join(dataDir, TokenFile), token)
}

// LoadOpenAIToken returns the /v1-only token saved in the data folder,
// creating one on first use. It is kept across runs, because it is
// configured into other programs; delete the file to rotate it.
func LoadOpenAIToken(dataDir string) (string, error) {
	return loadOrCreate(filepath.Join(dataDir, OpenAITokenFile), "lore-v1-")
}

func loadOrCreate(path, prefix string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		if t := strings.TrimSpace(string(b)); len(t) >= MinTokenLen && strings.HasPrefix(t, prefix) {
			if err := os.Chmod(path, 0o600); err != nil {
				return "", fmt.Errorf("token file: %w", err)
			}
			return t, nil
		}
	}
	t, err := newToken(prefix)
	if err != nil {
		return "", err
	}
	return t, saveToken(path, t)
}

func newToken(prefix string) (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return prefix + hex.EncodeToString(b[:]), nil
}

// saveToken writes a fresh file and renames it over the old one:
// os.WriteFile keeps an existing file's (possibly world-readable) mode.
func saveToken(path, t string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".token-*")
	if err != nil {
		return fmt.Errorf("save token: %w", err)
	}
	_, werr := tmp.WriteString(t + "\n")
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), 0o600), os.Rename(tmp.Name(), path)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("save token: %w", err)
	}
	return nil
}

// Listen binds addr, refusing addresses that are not loopback.
func Listen(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("address %q: %w", addr, err)
	}
	ip := net.ParseIP(host)
	if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("refusing to listen on %s: Lore serves loopback only (127.0.0.1, ::1, localhost)", addr)
	}
	return net.Listen("tcp", addr)
}

// New returns a server for a; ln's address fixes the allowed Host and
// Origin values.
func New(a *app.App, token string, ln net.Listener, opt Options) *Server {
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	s := &Server{app: a, token: token, openai: opt.OpenAIToken, ui: opt.UI, metrics: opt.Metrics,
		hosts: map[string]bool{}, origins: map[string]bool{},
		readTimeout: opt.ReadTimeout, maxProgress: int64(opt.MaxProgressStreams),
		// The MCP sessions need no closing here: the SDK's handler has no
		// public Close, and ends a session idle for mcp.SessionTimeout (or
		// one its client deletes); the app outlives them all.
		mcp: mcp.Handler(mcp.New(a, mcp.Options{Tracer: opt.Tracer, Workspace: opt.Workspace, Version: opt.Version}))}
	if s.readTimeout <= 0 {
		s.readTimeout = DefaultReadTimeout
	}
	if s.maxProgress <= 0 {
		s.maxProgress = DefaultMaxProgressStreams
	}
	for _, h := range []string{"127.0.0.1", "localhost", "[::1]"} {
		s.hosts[h+":"+port] = true
		s.origins["http://"+h+":"+port] = true
	}
	return s
}

// URL is the address to open, carrying the token in its fragment: a
// fragment never reaches the server (nor logs or Referer headers), and the
// page removes it from the address bar as soon as it has read it.
func (s *Server) URL(ln net.Listener) string {
	return fmt.Sprintf("http://127.0.0.1:%d/#token=%s", ln.Addr().(*net.TCPAddr).Port, s.token)
}

// OpenAIBase is the base URL for OpenAI-compatible clients.
func (s *Server) OpenAIBase(ln net.Listener) string {
	return fmt.Sprintf("http://127.0.0.1:%d/v1", ln.Addr().(*net.TCPAddr).Port)
}

// MCPURL is the MCP endpoint (streamable HTTP); it takes the full token
// as a bearer token.
func (s *Server) MCPURL(ln net.Listener) string {
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", ln.Addr().(*net.TCPAddr).Port)
}

// Serve serves on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler: s.Handler(),
		// ReadTimeout covers headers and body; net/http lifts the read
		// deadline once the body is read, so long streamed replies (and
		// noticing a client that leaves them) are unaffected.
		ReadHeaderTimeout: min(10*time.Second, s.readTimeout),
		ReadTimeout:       s.readTimeout,
		MaxHeaderBytes:    32 << 10,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		<-ctx.Done()
		sh, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sh)
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	// Serve returns as soon as Shutdown closes the listener; wait for the
	// handlers in flight to finish so the caller can close the app safely.
	<-drained
	return nil
}

// Handler is the whole server: checks first, then the routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	api := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, s.auth(scopeAll, h)) }
	v1 := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, s.auth(scopeOpenAI, h)) }

	api("POST /api/ask", s.ask)
	api("POST /api/ask/{id}/cancel", s.cancel)
	api("POST /api/prefetch", s.prefetch)
	api("GET /api/prefetch", s.prefetchStatus)
	api("GET /api/prefetch/events", s.prefetchEvents)
	api("GET /api/workspaces", s.workspaces)
	api("POST /api/workspaces", s.createWorkspace)
	api("PATCH /api/workspaces/{ws}", s.renameWorkspace)
	api("DELETE /api/workspaces/{ws}", s.deleteWorkspace)
	api("POST /api/workspaces/{ws}/folders", s.addFolder)
	api("DELETE /api/workspaces/{ws}/folders", s.removeFolder)
	api("POST /api/workspaces/{ws}/index", s.reindex)
	api("GET /api/workspaces/{ws}/progress", s.progress)
	api("GET /api/workspaces/{ws}/documents", s.documents)
	api("GET /api/chats", s.chats)
	api("GET /api/chats/{id}", s.chat)
	api("GET /api/chunks/{id}", s.chunk)
	api("GET /api/traces", s.traces)
	api("GET /api/traces/stats", s.traceStats)
	api("GET /api/traces/{id}", s.trace)
	api("POST /api/traces/{id}/ui", s.reportUI)
	api("GET /api/models", s.models)
	api("GET /api/system", s.system)
	api("GET /api/settings", s.getSettings)
	api("GET /api/bench/hnsw", s.sweep)
	api("PUT /api/settings", s.putSettings)
	v1("POST /v1/chat/completions", s.completions)
	v1("GET /v1/models", s.openaiModels)
	v1("POST /v1/embeddings", s.embeddings)
	v1("POST /v1/rerank", s.rerank)
	// MCP over streamable HTTP: the same tools and resources as `lore mcp`,
	// behind the full token like the API. POST carries the calls, GET a
	// session's stream of notifications, DELETE ends a session.
	for _, method := range []string{"POST", "GET", "DELETE"} {
		api(method+" /mcp", s.mcp.ServeHTTP)
	}
	if s.metrics != nil {
		mux.Handle("GET /metrics", s.auth(scopeAll, s.metrics.ServeHTTP))
	}
	mux.HandleFunc("GET /", s.static)
	return s.guard(mux)
}

// guard runs before any handler: exact Host (DNS rebinding: a rebound page
// is same-origin, so only the Host header tells), Origin when present,
// Sec-Fetch-Site, and bounded bodies.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hosts[r.Host] {
			writeError(w, http.StatusForbidden, "host not allowed")
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !s.origins[o] {
			writeError(w, http.StatusForbidden, "origin not allowed")
			return
		}
		// Browsers send Sec-Fetch-Site on every request. "same-site"
		// includes every other port of 127.0.0.1 and localhost, so only
		// the page's own origin ("same-origin") and the user typing the
		// address ("none") pass; clients that are not browsers send none.
		switch r.Header.Get("Sec-Fetch-Site") {
		case "", "same-origin", "none":
		default:
			writeError(w, http.StatusForbidden, "request from another site or port")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// A scope is what a route demands of its token.
type scope int

const (
	scopeAll    scope = iota // the full token
	scopeOpenAI              // the full token or the /v1-only one
)

// auth accepts the bearer token a route's scope allows. Cookies are never
// read (see the package comment).
func (s *Server) auth(sc scope, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deny := func(code int, msg string) {
			if sc == scopeOpenAI {
				writeJSON(w, code, openaiError(code, msg))
			} else {
				writeError(w, code, msg)
			}
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			got = ""
		}
		switch {
		case tokenIs(got, s.token):
		case tokenIs(got, s.openai) && sc == scopeOpenAI:
		case tokenIs(got, s.openai):
			deny(http.StatusForbidden, "this key grants the OpenAI-compatible API only (POST /v1/chat/completions, /v1/embeddings, /v1/rerank, GET /v1/models)")
			return
		default:
			deny(http.StatusUnauthorized, "missing or wrong token: open the URL that `lore serve` printed, or use the API key it printed for /v1")
			return
		}
		h(w, r)
	})
}

// tokenIs compares in constant time; an empty want matches nothing.
func tokenIs(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// static serves the UI. `/?token=…` (the old login URL, kept for links
// and scripts) redirects to `/#token=…`, where the page takes the token
// from the fragment; no cookie is set.
func (s *Server) static(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Path; strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/v1/") || p == "/metrics" || strings.HasPrefix(p, "/mcp/") {
		writeError(w, http.StatusNotFound, "no such endpoint") // not the UI's index page
		return
	}
	if t := r.URL.Query().Get("token"); t != "" && r.URL.Path == "/" {
		if !tokenIs(t, s.token) {
			writeError(w, http.StatusUnauthorized, "wrong token")
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, "/#token="+s.token, http.StatusSeeOther)
		return
	}
	if _, err := r.Cookie("lore_token"); err == nil {
		// Left by an older Lore, which authenticated with it: expire it,
		// since browsers send it to every port of this host.
		http.SetCookie(w, &http.Cookie{Name: "lore_token", Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
			SameSite: http.SameSiteStrictMode})
	}
	w.Header().Set("Content-Security-Policy", csp)
	w.Header().Set("X-Frame-Options", "DENY")
	if s.ui == nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "Lore's web UI is not built into this binary (run `make build`). The API is at /api/.")
		return
	}
	http.FileServerFS(s.ui).ServeHTTP(w, r)
}

type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// fail maps an app error to a status and writes it as {"error": "…"}.
func fail(w http.ResponseWriter, err error) {
	code, msg := statusOf(w, err)
	writeError(w, code, msg)
}

// statusOf maps an app error to a status and a message, setting the
// headers that go with it.
func statusOf(w http.ResponseWriter, err error) (int, string) {
	var mb *http.MaxBytesError
	switch {
	case errors.Is(err, app.ErrBusy):
		w.Header().Set("Retry-After", "2")
		return http.StatusTooManyRequests, "Lore is busy answering other questions; try again shortly"
	case errors.As(err, &mb):
		return http.StatusRequestEntityTooLarge, "request body too large"
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The body did not arrive within ReadTimeout (the connection's
		// read deadline; a request's own deadline is context's).
		w.Header().Set("Connection", "close")
		return http.StatusRequestTimeout, "request body too slow"
	case errors.Is(err, app.ErrOutsideLibrary):
		return http.StatusForbidden, err.Error()
	case errors.Is(err, app.ErrNotFound):
		return http.StatusNotFound, err.Error()
	case errors.Is(err, app.ErrExists):
		return http.StatusConflict, err.Error()
	case errors.Is(err, errBadRequest), errors.Is(err, app.ErrInvalid):
		return http.StatusBadRequest, err.Error()
	}
	return http.StatusInternalServerError, err.Error()
}

var errBadRequest = errors.New("bad request")

func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) || errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		return fmt.Errorf("%w: %v", errBadRequest, err)
	}
	return nil
}
