package mcp

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"lore/app"
)

// documentTemplate names an indexed document by its file URI.
const documentTemplate = "file:///{+path}"

func (l *lore) addResources(s *sdk.Server) {
	s.AddResourceTemplate(&sdk.ResourceTemplate{Name: "document", Title: "An indexed document", URITemplate: documentTemplate,
		Description: "A file of the user's library by its file URI (every passage carries its document's), read-only. " +
			"Only indexed documents inside their workspace's folders can be read."},
		l.readDocument)
}

// listDocuments adds the indexed documents to resources/list's first page
// (at most MaxListed): they change as folders are indexed, so they are
// listed when asked for rather than registered.
func (l *lore) listDocuments(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		list, ok := res.(*sdk.ListResourcesResult)
		if method != "resources/list" || err != nil || !ok {
			return res, err
		}
		if p, ok := req.GetParams().(*sdk.ListResourcesParams); ok && p != nil && p.Cursor != "" {
			return res, err // a later page: the documents came with the first
		}
		docs, err := l.documents(ctx)
		if err != nil {
			return nil, fmt.Errorf("list documents: %w", err)
		}
		list.Resources = append(list.Resources, docs...)
		return list, nil
	}
}

// documents are the indexed documents of every workspace as resources.
func (l *lore) documents(ctx context.Context) ([]*sdk.Resource, error) {
	wss, err := l.app.Workspaces(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	out := []*sdk.Resource{}
	for _, w := range wss {
		docs, err := l.app.Documents(ctx, w.Name)
		if err != nil {
			return nil, fmt.Errorf("workspace %q: %w", w.Name, err)
		}
		for _, d := range docs {
			uri := fileURI(d.Path)
			if d.Chunks == 0 || seen[uri] {
				continue
			}
			if len(out) == MaxListed {
				return out, nil
			}
			seen[uri] = true
			out = append(out, &sdk.Resource{URI: uri, Name: d.Rel, Title: d.Title, MIMEType: mimeType(d.Path),
				Description: fmt.Sprintf("indexed in workspace %q", w.Name)})
		}
	}
	return out, nil
}

// readDocument reads an indexed document, refusing any other file: the app
// opens it inside its workspace's folder (app.OpenDocument).
func (l *lore) readDocument(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	path, err := pathOf(uri)
	if err != nil {
		return nil, err
	}
	f, _, err := l.app.OpenDocument(ctx, path)
	switch {
	case errors.Is(err, app.ErrNotFound):
		// The SDK's "resource not found" code, with the reason.
		return nil, fmt.Errorf("read %s: %v (only indexed documents can be read, nothing outside the library): %w", uri, err, sdk.ResourceNotFoundError(uri))
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", uri, err)
	}
	defer f.Close()
	data, err := readAll(f, MaxResourceBytes)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", uri, err)
	}
	c := &sdk.ResourceContents{URI: uri, MIMEType: mimeType(path)}
	if isText(data) {
		c.Text, c.MIMEType = string(data), cmp.Or(c.MIMEType, "text/plain; charset=utf-8")
	} else {
		c.Blob, c.MIMEType = data, cmp.Or(c.MIMEType, "application/octet-stream")
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{c}}, nil
}

// fileURI is path as a file:// URI.
func fileURI(path string) string {
	p := filepath.ToSlash(path)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // C:/x → /C:/x
	}
	return (&url.URL{Scheme: "file", Path: p}).String()
}

// pathOf is a file:// URI's absolute path.
func pathOf(uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q: a document's URI is file:///PATH (as search returns it)", uri)
	}
	p := u.Path
	if runtime.GOOS == "windows" && len(p) > 2 && p[0] == '/' && p[2] == ':' {
		p = p[1:] // /C:/x → C:/x
	}
	p = filepath.FromSlash(p)
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%q: not an absolute path", uri)
	}
	return filepath.Clean(p), nil
}

// readAll reads at most limit bytes of r, refusing more.
func readAll(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("the file is larger than the %d MiB a resource may be: open it from its path", limit>>20)
	}
	return data, nil
}

// mimeType is a document's type by its extension ("": unknown).
func mimeType(path string) string {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".md", ".markdown":
		return "text/markdown; charset=utf-8"
	case ".txt", ".text", ".rst", ".org", ".log":
		return "text/plain; charset=utf-8"
	default:
		return mime.TypeByExtension(ext)
	}
}

// isText says whether data reads as text: UTF-8 without NUL bytes.
func isText(data []byte) bool {
	return utf8.Valid(data) && !bytes.Contains(data, []byte{0})
}
