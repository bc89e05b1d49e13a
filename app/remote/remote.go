// Package remote talks to an OpenAI-compatible HTTP server (llama-server,
// vLLM, Ollama, another Lore) for the chat, embedding and rerank roles,
// so that generation can move to a bigger machine while the library,
// retrieval and traces stay local. Chat implements app.Generator, Embedder
// app.Embedder and Reranker app.Reranker.
//
// Nothing here reads the environment: the caller passes the API key (Lore
// takes it from LORE_API_KEY or the OS keyring), and no error or ID ever
// contains it.
package remote

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"lore/engine"
)

// Unknown marks a token count the server did not report. A count of 0
// would read as "nothing was cached", which is a claim; -1 is none.
const Unknown = -1

// ErrUnavailable wraps every failure that happened before the first token
// and that a local model could answer instead: the server is down, too
// slow to start (over the first-token budget), rate-limiting (429) or
// failing (5xx). Callers fall back on errors.Is(err, ErrUnavailable).
var ErrUnavailable = errors.New("remote model unavailable")

// ErrMismatch is returned by Embedder when the server's vectors are not
// the ones the index was built with (another model, another dimension).
var ErrMismatch = errors.New("remote embedding mismatch")

// StatusError is a non-2xx reply.
type StatusError struct {
	Code int
	Msg  string // the server's error message, trimmed
}

func (e *StatusError) Error() string {
	if e.Msg == "" {
		return fmt.Sprintf("HTTP %d", e.Code)
	}
	return fmt.Sprintf("HTTP %d: %s", e.Code, e.Msg)
}

// Options configure one remote role.
type Options struct {
	// URL is the API base, e.g. http://gpu-box:8080/v1; /chat/completions
	// and /embeddings are appended.
	URL   string
	Model string // sent as "model"; also part of ID
	// APIKey is sent as a bearer token; never logged, stored or put in errors.
	APIKey string
	// InsecureSkipVerify turns off TLS certificate checks (a self-signed
	// team server); off by default.
	InsecureSkipVerify bool
	// ConnectTimeout bounds dialling and the TLS handshake (default 5 s).
	ConnectTimeout time.Duration
	// FirstToken is the TTFT budget: with no content by then the request
	// is abandoned as ErrUnavailable, so a local model can answer
	// (default 60 s).
	FirstToken time.Duration
	// Stall bounds the silence between two chunks once streaming
	// (default 30 s).
	Stall time.Duration
	// Retries is how many times a request is tried again before its first
	// token (connection refused, 429, 5xx); never after (default 2, <0 none).
	Retries int
	// Backoff is the first retry's wait, doubled each time (default 200 ms).
	Backoff time.Duration
	// NumCtx is the server's context size as Lore should assume it
	// (default 8192).
	NumCtx int
	// Cooldown backs a failing server off (rerank only): after a failure,
	// calls fail at once with ErrUnavailable for this long, doubled with
	// each failure in a row up to MaxCooldown; 0 never backs off.
	Cooldown time.Duration
	// PlainKey allows sending APIKey over plain http to a host that is
	// not loopback, where anyone on the network path can read it; off by
	// default, so such a URL is refused.
	PlainKey bool
	// Client replaces the HTTP client (tests); the timeouts above still apply.
	Client *http.Client
}

func (o *Options) defaults() error {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("remote: bad URL %q: want http(s)://host[:port]/v1", o.URL)
	}
	u.User = nil // credentials belong in APIKey, not in an ID shown everywhere
	if o.exposesKey(u) {
		return fmt.Errorf("remote: %s is plain http to another machine: the API key would cross the network readable; use https, or an SSH tunnel to a loopback port, or allow it (remote_plain_key)", u.Redacted())
	}
	o.URL = strings.TrimRight(u.String(), "/")
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.ConnectTimeout, 5*time.Second)
	def(&o.FirstToken, 60*time.Second)
	def(&o.Stall, 30*time.Second)
	def(&o.Backoff, 200*time.Millisecond)
	if o.Retries == 0 {
		o.Retries = 2
	}
	if o.NumCtx == 0 {
		o.NumCtx = 8192
	}
	if o.Client == nil {
		d := &net.Dialer{Timeout: o.ConnectTimeout}
		o.Client = &http.Client{CheckRedirect: o.redirect, Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         d.DialContext,
			TLSHandshakeTimeout: o.ConnectTimeout,
			TLSClientConfig:     &tls.Config{InsecureSkipVerify: o.InsecureSkipVerify},
			MaxIdleConnsPerHost: 4,
			// Streams are read as they come; gzip would buffer them.
			DisableCompression: true,
		}}
	}
	return nil
}

// redirect follows a redirect as Go does, unless it would carry the API
// key (Go resends it to the same host whatever the scheme) over plain http
// to another machine.
func (o *Options) redirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if o.exposesKey(req.URL) {
		return fmt.Errorf("refused a redirect to %s: plain http to another machine would carry the API key readable", req.URL.Redacted())
	}
	return nil
}

// exposesKey says whether sending the API key to u would carry it over
// plain http to another machine, without the user allowing it.
func (o *Options) exposesKey(u *url.URL) bool {
	return o.APIKey != "" && u.Scheme == "http" && !o.PlainKey && !loopback(u.Hostname())
}

// loopback says whether host (a name or an address) is this machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// MaxCooldown bounds how long a failing server is backed off.
const MaxCooldown = 5 * time.Minute

// breaker backs a failing server off: after a failure, calls fail at once
// for a cooldown that doubles with each failure in a row; the first call
// after it tries the server again. Calls already under way when a failure
// came say nothing more about the server (one outage is one failure, however
// many calls it caught).
type breaker struct {
	first  time.Duration // 0: never back off
	mu     sync.Mutex
	fails  int // in a row
	failed time.Time
	until  time.Time
	last   error
}

// check refuses a call starting at now while the server is backed off.
func (b *breaker) check(now time.Time) error {
	if b.first == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Before(b.until) {
		return fmt.Errorf("%w: not tried for %v more, after %d failure(s) in a row; the last: %w",
			ErrUnavailable, b.until.Sub(now).Round(100*time.Millisecond), b.fails, b.last)
	}
	return nil
}

// done notes the outcome of a call that started at start and ended at now;
// the caller's own cancellation says nothing about the server.
func (b *breaker) done(start, now time.Time, err error) {
	if b.first == 0 || errors.Is(err, context.Canceled) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case err == nil:
		b.fails, b.until, b.last = 0, time.Time{}, nil
	case start.Before(b.failed): // under way when the last failure came
	default:
		b.fails++
		b.failed, b.last = now, err
		b.until = now.Add(min(b.first<<min(b.fails-1, 16), MaxCooldown))
	}
}

// client is what Chat and Embedder share: one base URL, key and HTTP client.
type client struct{ o Options }

// post sends body as JSON to path, retrying before any reply is read.
// The caller closes the response body. sent is when the first attempt
// started; headers is the wait from the last attempt's request to its
// response headers (the network round trip plus the server's queueing).
func (c *client) post(ctx context.Context, path string, body any) (resp *http.Response, headers time.Duration, err error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, 0, err
	}
	wait := c.o.Backoff
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, "POST", c.o.URL+path, bytes.NewReader(b))
		if err != nil {
			return nil, 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if c.o.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+c.o.APIKey)
		}
		start := time.Now()
		resp, err = c.o.Client.Do(req)
		headers = time.Since(start)
		if err == nil && resp.StatusCode/100 == 2 {
			return resp, headers, nil
		}
		retry := false
		if err != nil {
			err = c.scrub(err)
			retry = ctx.Err() == nil && (errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || isTimeout(err))
			if ctx.Err() == nil {
				err = fmt.Errorf("%w: %w", ErrUnavailable, err)
			}
		} else {
			se := &StatusError{Code: resp.StatusCode, Msg: c.hide(errorMessage(resp.Body))}
			resp.Body.Close()
			err = se
			if se.Code == http.StatusTooManyRequests || se.Code >= 500 {
				retry = true
				err = fmt.Errorf("%w: %w", ErrUnavailable, se)
			}
		}
		if !retry || attempt >= c.o.Retries {
			return nil, headers, fmt.Errorf("remote %s%s: %w", c.o.URL, path, err)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, headers, fmt.Errorf("remote %s%s: %w", c.o.URL, path, context.Cause(ctx))
		}
		wait *= 2
	}
}

// scrub keeps the API key out of an error's text (url.Error quotes the URL,
// which never has it, but a proxy's message might echo the header).
func (c *client) scrub(err error) error { return ScrubKey(err, c.o.APIKey) }

// hide blanks the API key out of a server's text.
func (c *client) hide(s string) string { return HideKey(s, c.o.APIKey) }

// HideKey blanks key out of s: error text ends up in traces, logs and the
// UI.
func HideKey(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[key]")
}

// ScrubKey keeps key out of err's text.
func ScrubKey(err error, key string) error {
	if key == "" || !strings.Contains(err.Error(), key) {
		return err
	}
	return errors.New(HideKey(err.Error(), key))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// errorMessage reads an OpenAI-shaped {"error": {"message"}} or plain text.
func errorMessage(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 4096))
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && len(e.Error) > 0 {
		var m struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &m) == nil && m.Message != "" {
			return m.Message
		}
		var s string
		if json.Unmarshal(e.Error, &s) == nil {
			return s
		}
	}
	return strings.TrimSpace(string(b))
}

// Chat is a remote chat model.
type Chat struct {
	client
	tmpl *engine.Template
}

// NewChat checks the options; it does not contact the server.
func NewChat(o Options) (*Chat, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	// Lore renders its prompts in ChatML and Chat parses them back into
	// messages, so the prompt layout (system prompt and passages first,
	// the question last) is the one the local model sees, whatever
	// template the server applies.
	return &Chat{client: client{o}, tmpl: engine.TemplateFor("<|im_start|>")}, nil
}

// ID names the server and model, never the key.
func (c *Chat) ID() string { return "remote:" + c.o.URL + "#" + c.o.Model }

// URL is the API base the chat role sends questions and passages to.
func (c *Chat) URL() string { return c.o.URL }

// Template is ChatML, the format Generate parses prompts from.
func (c *Chat) Template() *engine.Template { return c.tmpl }

// Info describes the remote model as far as Lore knows it.
func (c *Chat) Info() engine.Info {
	return engine.Info{Path: c.ID(), Template: c.tmpl.Name, NumCtx: c.o.NumCtx, CPUVariant: "remote"}
}

// CountTokens estimates: one token per four bytes, rounded up (English
// prose with BPE vocabularies runs 3.5–4.5). Token budgets only need a
// count, and a round trip per passage would cost more than the estimate's
// error. There is nothing to warm or read ahead: the server's prefix cache
// fills on the first request that carries the system prompt
// (cache_prompt), and a request made only for that would cost a
// generation.
func (c *Chat) CountTokens(ctx context.Context, text string) (int, error) {
	return (len(text) + 3) / 4, nil
}

// Close releases idle connections.
func (c *Chat) Close() error {
	c.o.Client.CloseIdleConnections()
	return nil
}

// chatRequest is the body of POST /chat/completions.
type chatRequest struct {
	Model         string           `json:"model"`
	Messages      []engine.Message `json:"messages"`
	Stream        bool             `json:"stream"`
	StreamOptions map[string]bool  `json:"stream_options,omitempty"`
	// CachePrompt asks llama-server to reuse the longest cached prefix;
	// other servers ignore the field.
	CachePrompt bool     `json:"cache_prompt"`
	MaxTokens   int      `json:"max_tokens,omitempty"`
	Stop        []string `json:"stop,omitempty"`
	Temperature float32  `json:"temperature"` // always sent: 0 is greedy
	TopP        *float32 `json:"top_p,omitempty"`
	Seed        *uint32  `json:"seed,omitempty"`
}

// chunk is one streamed event: OpenAI's fields plus llama-server's timings.
type chunk struct {
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens *int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Timings *struct {
		CacheN      *int    `json:"cache_n"`
		PromptN     int     `json:"prompt_n"`
		PromptMs    float64 `json:"prompt_ms"`
		PredictedN  int     `json:"predicted_n"`
		PredictedMs float64 `json:"predicted_ms"`
	} `json:"timings"`
	Error json.RawMessage `json:"error"`
}

// errSlow is the cause given to a request cancelled for its TTFT budget
// or a stalled stream.
var errSlow = errors.New("remote model too slow")

// Generate streams the completion of req to fn. Stats carry what was
// measured here (ClientTTFT: from the request to the first non-empty delta,
// retries included; RunnerRTTMs: request to response headers, the network
// and the server's queue) and what the server reported; counts it did not
// report are Unknown. DecodeTokens is the number of content chunks when the
// server gives no count (servers stream one token a chunk).
func (c *Chat) Generate(ctx context.Context, req engine.GenerateRequest, fn func(string) error) (engine.Stats, error) {
	st := engine.Stats{PromptTokens: Unknown, CachedTokens: Unknown, EvalTokens: Unknown}
	msgs := req.Messages
	if req.Prompt != "" {
		var err error
		if msgs, err = ParseChatML(req.Prompt); err != nil {
			return st, err
		}
	}
	body := chatRequest{Model: c.o.Model, Messages: msgs, Stream: true, StreamOptions: map[string]bool{"include_usage": true},
		CachePrompt: true, MaxTokens: req.MaxTokens, Stop: req.Stop}
	// Temperature 0 is sent too: Lore's default is greedy, a server's is
	// usually sampling (Ollama's 0.8).
	s := req.Sampling
	body.Temperature = s.Temperature
	if s.TopP > 0 {
		body.TopP = &s.TopP
	}
	if s.Seed != 0 {
		body.Seed = &s.Seed
	}
	if req.OnPlan != nil {
		req.OnPlan(st) // the server plans out of sight: counts unknown
	}

	// One timer guards the first token, then each gap between chunks.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(c.o.FirstToken, func() { cancel(errSlow) })
	defer timer.Stop()

	start := time.Now()
	resp, headers, err := c.post(ctx, "/chat/completions", body)
	if err != nil {
		return st, c.failed(ctx, err, false, false)
	}
	defer resp.Body.Close() // also what stops the server: it sees the connection close
	st.RunnerRTTMs = ms(headers)

	var first, last time.Time
	chunks := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue // comments, event names, blank separators
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			break
		}
		var ch chunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return st, fmt.Errorf("remote %s: bad stream chunk: %w", c.o.URL, err)
		}
		if len(ch.Error) > 0 {
			msg := c.hide(errorMessage(strings.NewReader(`{"error":` + string(ch.Error) + `}`)))
			err := fmt.Errorf("remote %s: server error mid-stream: %s", c.o.URL, msg)
			if first.IsZero() {
				err = fmt.Errorf("%w: %w", ErrUnavailable, err)
			}
			return st, err
		}
		for _, choice := range ch.Choices {
			if text := choice.Delta.Content; text != "" {
				now := time.Now()
				if first.IsZero() && strings.TrimSpace(text) != "" {
					first = now
					st.ClientTTFT = ms(now.Sub(start))
				}
				last = now
				chunks++
				timer.Reset(c.o.Stall)
				if err := fn(text); err != nil {
					st.StopReason = "cancel"
					return st, err
				}
			}
			if r := choice.FinishReason; r != nil && *r != "" {
				st.StopReason = stopReason(*r)
			}
		}
		if u := ch.Usage; u != nil {
			st.PromptTokens, st.DecodeTokens = u.PromptTokens, u.CompletionTokens
			if d := u.PromptTokensDetails; d != nil && d.CachedTokens != nil {
				st.CachedTokens = *d.CachedTokens
				st.EvalTokens = u.PromptTokens - *d.CachedTokens
			}
		}
		if t := ch.Timings; t != nil {
			// llama-server: prompt_n is what it evaluated, cache_n what it reused.
			st.EvalTokens, st.PrefillMs, st.DecodeTokens, st.DecodeMs = t.PromptN, t.PromptMs, t.PredictedN, t.PredictedMs
			if t.CacheN != nil {
				st.CachedTokens = *t.CacheN
				st.PromptTokens = t.PromptN + *t.CacheN
			}
		}
	}
	if err := sc.Err(); err != nil || (st.StopReason == "" && ctx.Err() != nil) {
		if err == nil {
			err = context.Cause(ctx)
		}
		if ctx.Err() != nil && !errors.Is(context.Cause(ctx), errSlow) {
			st.StopReason = "cancel"
		}
		return st, c.failed(ctx, fmt.Errorf("remote %s: stream: %w", c.o.URL, err), true, !first.IsZero())
	}
	if st.StopReason == "" {
		// A stream that ends without a finish_reason or [DONE] was cut.
		if first.IsZero() {
			return st, fmt.Errorf("%w: remote %s: stream ended before any token", ErrUnavailable, c.o.URL)
		}
		return st, fmt.Errorf("remote %s: stream ended mid-answer", c.o.URL)
	}
	if st.DecodeTokens == 0 {
		st.DecodeTokens = chunks
	}
	if st.DecodeMs == 0 && !first.IsZero() {
		st.DecodeMs = ms(last.Sub(first))
	}
	if st.DecodeTokens > 1 && st.DecodeMs > 0 {
		st.DecodeTokS = float64(st.DecodeTokens-1) / (st.DecodeMs / 1000)
	}
	return st, nil
}

// failed classifies an error from a cancelled or broken request: the
// caller's cancellation stays itself; the TTFT budget, or a stream broken
// before its first token, is ErrUnavailable (a fallback can still answer
// in full); a stream broken after it is not.
func (c *Chat) failed(ctx context.Context, err error, stream, started bool) error {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errSlow) && !started:
		return fmt.Errorf("%w: no token within %v: %w", ErrUnavailable, c.o.FirstToken, err)
	case errors.Is(cause, errSlow):
		return fmt.Errorf("remote stream stalled for %v: %w", c.o.Stall, err)
	case cause != nil && !errors.Is(err, cause):
		return fmt.Errorf("%w (%w)", err, cause)
	case cause != nil:
		return err
	case stream && started:
		return fmt.Errorf("cut mid-answer: %w", err)
	case stream:
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

func stopReason(r string) string {
	switch r {
	case "length":
		return "length"
	case "stop":
		return "stop"
	}
	return r
}

// ParseChatML splits a ChatML prompt (as engine's chatml template renders
// it) back into messages; the open assistant turn at the end is dropped.
func ParseChatML(prompt string) ([]engine.Message, error) {
	const open, end = "<|im_start|>", "<|im_end|>"
	parts := strings.Split(prompt, open)
	if strings.TrimSpace(parts[0]) != "" {
		return nil, fmt.Errorf("remote: prompt is not ChatML: text before the first %s", open)
	}
	var msgs []engine.Message
	for i, p := range parts[1:] {
		role, rest, ok := strings.Cut(p, "\n")
		if !ok {
			return nil, fmt.Errorf("remote: ChatML turn %d has no role line", i)
		}
		content, closed := strings.CutSuffix(rest, end+"\n")
		if !closed {
			content, closed = strings.CutSuffix(rest, end)
		}
		if !closed {
			if i == len(parts)-2 && role == "assistant" && rest == "" {
				break // the generation prompt
			}
			return nil, fmt.Errorf("remote: ChatML turn %d (%s) is not closed", i, role)
		}
		msgs = append(msgs, engine.Message{Role: role, Content: content})
	}
	if len(msgs) == 0 {
		return nil, errors.New("remote: empty prompt")
	}
	return msgs, nil
}

// Embedder is a remote embedding model.
type Embedder struct {
	client
	mu  sync.Mutex
	dim int // expected dimension; 0 until known (guarded by mu)
}

// NewEmbedder checks the options; dim is the dimension the index holds for
// this model (0: take the first reply's).
func NewEmbedder(o Options, dim int) (*Embedder, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	return &Embedder{client: client{o}, dim: dim}, nil
}

// ID keys the vectors in the index: the model name, so that vectors from
// another model are never read as this one's.
func (e *Embedder) ID() string { return "remote:" + e.o.Model }

// URL is the API base the embedding role sends text to.
func (e *Embedder) URL() string { return e.o.URL }

// Close releases idle connections.
func (e *Embedder) Close() error {
	e.o.Client.CloseIdleConnections()
	return nil
}

// Embed returns one normalised vector per text, refusing (ErrMismatch) a
// reply from another model than configured, or of another dimension than
// the index's.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.o.FirstToken)
	defer cancel()
	resp, _, err := e.post(ctx, "/embeddings", map[string]any{"model": e.o.Model, "input": texts, "encoding_format": "float"})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Model string `json:"model"`
		Data  []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(&r); err != nil {
		return nil, fmt.Errorf("remote %s/embeddings: %w", e.o.URL, err)
	}
	// Servers echo the model they ran; some add a tag or path (":latest",
	// "models/x.gguf"), so compare the base names.
	if r.Model != "" && e.o.Model != "" && baseModel(r.Model) != baseModel(e.o.Model) {
		return nil, fmt.Errorf("%w: server embedded with %q, the index uses %q", ErrMismatch, r.Model, e.o.Model)
	}
	if len(r.Data) != len(texts) {
		return nil, fmt.Errorf("remote %s/embeddings: %d vectors for %d texts", e.o.URL, len(r.Data), len(texts))
	}
	out := make([][]float32, len(texts))
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, d := range r.Data {
		if d.Index < 0 || d.Index >= len(out) || out[d.Index] != nil {
			return nil, fmt.Errorf("remote %s/embeddings: bad index %d", e.o.URL, d.Index)
		}
		if e.dim == 0 {
			e.dim = len(d.Embedding)
		}
		if len(d.Embedding) != e.dim {
			return nil, fmt.Errorf("%w: %d-dimensional vectors, the index holds %d", ErrMismatch, len(d.Embedding), e.dim)
		}
		out[d.Index] = normalize(d.Embedding)
	}
	return out, nil
}

// Reranker is a remote cross-encoder behind llama-server's rerank API
// (POST /rerank under the base URL: {model, query, documents, top_n} →
// {results: [{index, relevance_score}]}), which Lore's own server, vLLM
// and Jina's and Cohere's APIs share.
type Reranker struct {
	client
	down breaker
}

// NewReranker checks the options; it does not contact the server. The
// whole request is bounded by o.FirstToken; a failure backs the server
// off for o.Cooldown.
func NewReranker(o Options) (*Reranker, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	return &Reranker{client: client{o}, down: breaker{first: o.Cooldown}}, nil
}

// ID names the server and model, never the key.
func (r *Reranker) ID() string { return "remote:" + r.o.URL + "#" + r.o.Model }

// URL is the API base the rerank role sends the query and passages to.
func (r *Reranker) URL() string { return r.o.URL }

// Close releases idle connections.
func (r *Reranker) Close() error {
	r.o.Client.CloseIdleConnections()
	return nil
}

// Rerank returns one score per document, in the documents' order. Every
// failure before a complete reply wraps ErrUnavailable: for rerank any
// failure is a reason to fall back (to a local reranker, or none).
func (r *Reranker) Rerank(ctx context.Context, query string, docs []string) ([]float32, error) {
	if len(docs) == 0 {
		return nil, nil
	}
	start := time.Now()
	if err := r.down.check(start); err != nil {
		return nil, err
	}
	scores, err := r.rerank(ctx, query, docs)
	r.down.done(start, time.Now(), err)
	return scores, err
}

func (r *Reranker) rerank(ctx context.Context, query string, docs []string) ([]float32, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, r.o.FirstToken, errSlow)
	defer cancel()
	resp, _, err := r.post(ctx, "/rerank", map[string]any{"model": r.o.Model, "query": query, "documents": docs, "top_n": len(docs)})
	if err != nil {
		if errors.Is(context.Cause(ctx), errSlow) {
			return nil, fmt.Errorf("%w: no reply within %v: %w", ErrUnavailable, r.o.FirstToken, err)
		}
		return nil, unavailable(err)
	}
	defer resp.Body.Close()
	var reply struct {
		Results []struct {
			Index int      `json:"index"`
			Score *float64 `json:"relevance_score"`
		} `json:"results"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&reply); err != nil {
		return nil, unavailable(fmt.Errorf("remote %s/rerank: %w", r.o.URL, err))
	}
	scores := make([]float32, len(docs))
	seen := make([]bool, len(docs))
	for _, res := range reply.Results {
		if res.Index < 0 || res.Index >= len(docs) || seen[res.Index] || res.Score == nil {
			return nil, unavailable(fmt.Errorf("remote %s/rerank: bad result (index %d)", r.o.URL, res.Index))
		}
		seen[res.Index] = true
		scores[res.Index] = float32(*res.Score)
	}
	if len(reply.Results) != len(docs) {
		return nil, unavailable(fmt.Errorf("remote %s/rerank: %d scores for %d documents", r.o.URL, len(reply.Results), len(docs)))
	}
	return scores, nil
}

// unavailable wraps err in ErrUnavailable unless it already is, or is the
// caller's own cancellation.
func unavailable(err error) error {
	if errors.Is(err, ErrUnavailable) || errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

func baseModel(m string) string {
	m = m[strings.LastIndexAny(m, "/\\")+1:]
	m, _, _ = strings.Cut(m, ":")
	return strings.TrimSuffix(strings.ToLower(m), ".gguf")
}

func normalize(v []float32) []float32 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return v
	}
	n := float32(1 / math.Sqrt(s))
	for i := range v {
		v[i] *= n
	}
	return v
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
