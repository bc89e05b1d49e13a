// Package server is Lore's local HTTP API and web UI. It binds loopback,
// and every request passes an exact Host allowlist, an Origin check and a
// token check before any handler runs.
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
	"time"

	"lore/app"
)

// MaxBody bounds request bodies.
const MaxBody = 1 << 20

// Server serves the API and the UI for one App.
type Server struct {
	app   *app.App
	token string
	ui    fs.FS // the built frontend; nil serves a notice
	// hosts are the exact Host header values accepted; origins likewise.
	hosts   map[string]bool
	origins map[string]bool
	metrics http.Handler
}

// Options configures a Server.
type Options struct {
	UI      fs.FS
	Metrics http.Handler // /metrics; nil: 404
}

// LoadToken reads the access token from the data folder, creating it
// (readable by the user alone) on first use.
func LoadToken(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "token")
	if b, err := os.ReadFile(path); err == nil {
		if t := strings.TrimSpace(string(b)); len(t) >= 32 {
			os.Chmod(path, 0o600)
			return t, nil
		}
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	t := hex.EncodeToString(b[:])
	// Write a fresh file and rename it over the old one: os.WriteFile keeps
	// an existing file's (possibly world-readable) mode.
	tmp, err := os.CreateTemp(dataDir, ".token-*")
	if err != nil {
		return "", fmt.Errorf("save token: %w", err)
	}
	_, werr := tmp.WriteString(t + "\n")
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), 0o600), os.Rename(tmp.Name(), path)); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("save token: %w", err)
	}
	return t, nil
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
	s := &Server{app: a, token: token, ui: opt.UI, metrics: opt.Metrics,
		hosts: map[string]bool{}, origins: map[string]bool{}}
	for _, h := range []string{"127.0.0.1", "localhost", "[::1]"} {
		s.hosts[h+":"+port] = true
		s.origins["http://"+h+":"+port] = true
	}
	return s
}

// URL is the address to open, carrying the token.
func (s *Server) URL(ln net.Listener) string {
	return fmt.Sprintf("http://127.0.0.1:%d/?token=%s", ln.Addr().(*net.TCPAddr).Port, s.token)
}

// Serve serves on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
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
	api := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, s.auth(h)) }

	api("POST /api/ask", s.ask)
	api("POST /api/ask/{id}/cancel", s.cancel)
	api("POST /api/prefetch", s.prefetch)
	api("GET /api/workspaces", s.workspaces)
	api("POST /api/workspaces", s.createWorkspace)
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
	api("PUT /api/settings", s.putSettings)
	api("POST /v1/chat/completions", s.completions)
	api("GET /v1/models", s.openaiModels)
	if s.metrics != nil {
		mux.Handle("GET /metrics", s.auth(s.metrics.ServeHTTP))
	}
	mux.HandleFunc("GET /", s.static)
	return s.guard(mux)
}

// guard runs before any handler: exact Host (DNS rebinding: a rebound page
// is same-origin, so only the Host header tells), Origin when present, and
// bounded bodies.
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
		if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			writeError(w, http.StatusForbidden, "cross-site request")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// auth accepts the bearer token or the cookie the UI got from the URL.
func (s *Server) auth(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := ""
		if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			got = v
		} else if c, err := r.Cookie("lore_token"); err == nil {
			got = c.Value
		}
		if s.token == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) != 1 {
			writeError(w, http.StatusUnauthorized, "missing or wrong token: open the URL that `lore serve` printed")
			return
		}
		h(w, r)
	})
}

const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// static serves the UI. `/?token=…` sets the cookie and redirects, so the
// token leaves the address bar and history.
func (s *Server) static(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Path; strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/v1/") || p == "/metrics" {
		writeError(w, http.StatusNotFound, "no such endpoint") // not the UI's index page
		return
	}
	if t := r.URL.Query().Get("token"); t != "" && r.URL.Path == "/" {
		if s.token == "" || subtle.ConstantTimeCompare([]byte(t), []byte(s.token)) != 1 {
			writeError(w, http.StatusUnauthorized, "wrong token")
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "lore_token", Value: s.token, Path: "/", HttpOnly: true,
			SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
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

// fail maps an app error to a status.
func fail(w http.ResponseWriter, err error) {
	var mb *http.MaxBytesError
	switch {
	case errors.Is(err, app.ErrBusy):
		w.Header().Set("Retry-After", "2")
		writeError(w, http.StatusTooManyRequests, "Lore is busy answering other questions; try again shortly")
	case errors.As(err, &mb):
		writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
	case errors.Is(err, app.ErrOutsideLibrary):
		writeError(w, http.StatusForbidden, err.Error())
	case errors.Is(err, app.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, errBadRequest), errors.Is(err, app.ErrInvalid):
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

var errBadRequest = errors.New("bad request")

func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return err
		}
		return fmt.Errorf("%w: %v", errBadRequest, err)
	}
	return nil
}
