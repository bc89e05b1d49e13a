// Package mcp serves the library to other programs over the Model Context
// Protocol: tools to search it, ask it, list its workspaces, follow their
// indexing and read a passage, and its indexed documents as read-only
// resources, so that an agent beside Lore gets Lore's retrieval instead of
// reading whole folders.
//
// It is a front door beside the HTTP server: it calls lore/app alone, and
// checks every input (workspace, length, bounds, paths) before the app sees
// it. Nothing is written or deleted through it: no folders, indexing,
// workspaces or settings. An ask is kept as a chat with its trace, as any
// question is. Every call is logged and spanned with the client's name.
//
// The same server runs over stdio (`lore mcp`) and over streamable HTTP
// (/mcp on `lore serve`, behind that server's token, Host and Origin checks).
package mcp

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"lore/app"
)

// Options configures a server.
type Options struct {
	Version string       // reported to clients (default "dev")
	Logger  *slog.Logger // a line per call, with the client's name (default slog.Default()); never stdout
	Tracer  trace.Tracer // a span per call (default: none)
	// Workspace is the one a call means when it names none (default
	// app.DefaultWorkspace).
	Workspace string
}

// Limits on what a call may ask for: the HTTP API's question length, the
// settings' top_k range, and a cap on what one resource read returns.
const (
	MaxQuery         = app.MaxQuestion // bytes of a query or a question
	DefaultK         = 8
	MaxK             = 50
	MaxResourceBytes = 16 << 20
	// MaxListed bounds the documents resources/list returns; any indexed
	// document can still be read by its URI (search results carry it).
	MaxListed = 1000
)

const instructions = `Lore searches and answers from the user's own library of indexed documents on this machine.
Use search for ranked passages (file path, heading, scores), ask for an answer with numbered citations,
get_passage to read a passage by its chunk_id, and read a document resource (its file:// URI, given with
every passage) to open a cited file. list_workspaces names the libraries; most calls take a workspace.`

// lore is the server's state: the app and where calls are recorded.
type lore struct {
	app       *app.App
	log       *slog.Logger
	tracer    trace.Tracer
	defaultWS string // the workspace a call names when it names none
}

// New returns an MCP server for a, with its tools and resources.
func New(a *app.App, opt Options) *sdk.Server {
	l := &lore{app: a, log: cmp.Or(opt.Logger, slog.Default()), tracer: opt.Tracer, defaultWS: cmp.Or(opt.Workspace, app.DefaultWorkspace)}
	if l.tracer == nil {
		l.tracer = noop.NewTracerProvider().Tracer("lore/mcp")
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "lore", Title: "Lore", Version: cmp.Or(opt.Version, "dev")},
		&sdk.ServerOptions{Instructions: instructions, Logger: slog.New(quiet{l.log.Handler()})})
	l.addTools(s)
	l.addResources(s)
	s.AddReceivingMiddleware(l.record, l.listDocuments)
	return s
}

// quiet passes on the SDK's warnings and errors, not its news of every
// session: each call has its own line (record).
type quiet struct{ slog.Handler }

func (q quiet) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn && q.Handler.Enabled(ctx, level)
}

func (q quiet) WithAttrs(attrs []slog.Attr) slog.Handler { return quiet{q.Handler.WithAttrs(attrs)} }
func (q quiet) WithGroup(name string) slog.Handler       { return quiet{q.Handler.WithGroup(name)} }

// ServeStdio serves s on r and w (a client's pipes: stdin and stdout) until
// the client closes its end or ctx ends.
func ServeStdio(ctx context.Context, s *sdk.Server, r io.ReadCloser, w io.WriteCloser) error {
	err := s.Run(ctx, &sdk.IOTransport{Reader: r, Writer: w})
	if ctx.Err() != nil || errors.Is(err, io.EOF) {
		return nil // stopped, or the client went away: a normal end
	}
	return err
}

// SessionTimeout closes an HTTP session idle that long.
const SessionTimeout = 30 * time.Minute

// Handler serves s over streamable HTTP, a session per client. It checks
// no credentials: the caller mounts it behind its own (the HTTP server's
// token, Host and Origin checks). A session ends when its client deletes
// it or after SessionTimeout idle: the SDK's handler has no public Close,
// so sessions still open when the server stops end with the process.
func Handler(s *sdk.Server) http.Handler {
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s },
		&sdk.StreamableHTTPOptions{SessionTimeout: SessionTimeout})
}

// callKey keys a call's id in its context.
type callKey struct{}

// callID is the id a call is logged and spanned under; ask stores its trace
// under it too.
func callID(ctx context.Context) string {
	if id, ok := ctx.Value(callKey{}).(string); ok {
		return id
	}
	return app.NewRequestID()
}

// record gives every request an id and a span, and logs it with the
// client's name, what it called and how it ended.
func (l *lore) record(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if strings.HasPrefix(method, "notifications/") || method == "ping" {
			return next(ctx, method, req)
		}
		id, client, target := app.NewRequestID(), clientName(req), targetOf(req)
		ctx = context.WithValue(ctx, callKey{}, id)
		ctx, span := l.tracer.Start(ctx, "mcp "+method, trace.WithAttributes(attribute.String("lore.call_id", id),
			attribute.String("mcp.client", client), attribute.String("mcp.method", method), attribute.String("mcp.target", target)))
		start := time.Now()
		res, err := next(ctx, method, req)
		failure := err
		if r, ok := res.(*sdk.CallToolResult); ok && r.IsError {
			failure = cmp.Or(r.GetError(), errors.New("tool error"))
		}
		attrs := []any{"method", method, "client", client, "call_id", id, "ms", time.Since(start).Milliseconds()}
		if target != "" {
			attrs = append(attrs, "target", target)
		}
		if failure != nil {
			span.SetStatus(codes.Error, failure.Error())
			attrs = append(attrs, "error", failure.Error())
		}
		span.End()
		l.log.Info("mcp", attrs...)
		return res, err
	}
}

// clientName is the calling program's name as it introduced itself
// (initialize's clientInfo, or the request's own under the stateless
// protocol), cleaned for logs and traces.
func clientName(req sdk.Request) string {
	var impl *sdk.Implementation
	if p, ok := req.GetParams().(*sdk.InitializeParams); ok && p != nil {
		impl = p.ClientInfo
	} else if r, ok := req.(interface{ ClientInfo() *sdk.Implementation }); ok {
		impl = r.ClientInfo()
	}
	if impl == nil {
		return "unknown"
	}
	var name []rune
	for _, r := range impl.Name {
		if len(name) == 64 {
			break
		}
		if unicode.IsPrint(r) {
			name = append(name, r)
		}
	}
	return cmp.Or(strings.TrimSpace(string(name)), "unknown")
}

// targetOf is what a request is about: a tool's name, a resource's URI.
func targetOf(req sdk.Request) string {
	switch p := req.GetParams().(type) {
	case *sdk.CallToolParamsRaw:
		return p.Name
	case *sdk.ReadResourceParams:
		return p.URI
	}
	return ""
}
