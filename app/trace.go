package app

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Trace records where the time of one answer went. Stage times are
// milliseconds; StageStarts gives each stage's start as an offset from the
// moment the request was received, so stages can be drawn on one axis.
type Trace struct {
	RequestID   string `json:"request_id"`
	WorkspaceID int64  `json:"workspace_id"`
	ChatID      int64  `json:"chat_id"`
	Client      string `json:"client,omitempty"` // the program that asked, when a front door names it ("mcp:NAME")
	Question    string `json:"question"`
	VersionID   string `json:"version_id"`
	Route       string `json:"route"` // the model that answered
	// RouteRole is main or fast: which of the chat models the router
	// picked; RouteReason says why, in the words the UI shows.
	RouteRole   string `json:"route_role,omitempty"`
	RouteReason string `json:"route_reason,omitempty"`
	// RerankRoute is the reranker that ran when it is remote, or the local
	// one that stood in for it: "LOCAL-ID (fallback from remote:URL#MODEL)";
	// "" with a local reranker alone or none.
	RerankRoute    string   `json:"rerank_route,omitempty"`
	FallbackLevel  Fallback `json:"fallback_level"`
	FallbackReason string   `json:"fallback_reason"`
	PromptTokens   int      `json:"prompt_tokens"`
	CachedTokens   int      `json:"cached_tokens"`
	EvalTokens     int      `json:"eval_tokens"`
	ContextChunks  int      `json:"context_chunks"`
	// TurnPassages are the chunks this question's own turn carried, in
	// prompt order (a follow-up's prompt repeats them as they were).
	TurnPassages      []int64   `json:"turn_passages,omitempty"`
	ContextBudget     int       `json:"context_budget"`
	ContextBudgetFrom string    `json:"context_budget_from,omitempty"` // Budget*: the setting, a measurement, or a guess
	EmbedCacheHit     bool      `json:"embed_cache_hit"`
	EmbedLookup       bool      `json:"embed_lookup,omitempty"` // the query embedding was looked up
	RetrievalCacheHit bool      `json:"retrieval_cache_hit"`
	RetrievalMode     string    `json:"retrieval_mode"`
	Received          time.Time `json:"received"`
	FirstTokenAt      time.Time `json:"first_token_at"`
	DecodeTokens      int       `json:"decode_tokens"`
	DecodeTokS        float64   `json:"decode_tok_s"`
	StopReason        string    `json:"stop_reason,omitempty"`
	// Prefetch is hit, partial, miss or none: whether the prompt up to the
	// question was read while the user typed (partial: up to passages the
	// last words brought); PrefetchMiss says why not (passages
	// changed, model changed, evicted, too late); PrefetchedTokens is what
	// the question adopted beyond the system prefix; PrefetchAgeMs how long
	// before the answer began the prefetch started.
	// PrefetchNewPassages counts the passages a partial prefetch lacked,
	// read after Enter.
	Prefetch            string  `json:"prefetch,omitempty"`
	PrefetchMiss        string  `json:"prefetch_miss,omitempty"`
	PrefetchedTokens    int     `json:"prefetched_tokens"`
	PrefetchAgeMs       float64 `json:"prefetch_age_ms,omitempty"`
	PrefetchNewPassages int     `json:"prefetch_new_passages,omitempty"`
	// StalePassages are in the prompt because a sequence held them already
	// (a draft's, or this question's when asked before) and they are still
	// among the question's candidates, though not among its best: reading
	// them again elsewhere would have cost the first token more than they
	// cost the context.
	StalePassages int `json:"stale_passages,omitempty"`
	// LatePassages were among the question's best but left out: the
	// drafts' passages were read, and reading these too would have missed
	// the first-token budget (Settings.RouteTTFTMs).
	LatePassages int `json:"late_passages,omitempty"`
	// Cut is what was kept of the question's best passage when it alone
	// was too long to read within the same budget: the run of its words
	// that holds the most of the question's words.
	Cut *PassageCut `json:"cut,omitempty"`
	// Restored is the tokens of an earlier question's state (another chat
	// whose prompt starts with the same passages), kept by the runner and
	// placed in the answer sequence before the prompt was read: exact KV,
	// reused as far as it matches (within CachedTokens). RestoreNote says
	// why a state named for restoring was not placed.
	Restored    int    `json:"restored_tokens,omitempty"`
	RestoreNote string `json:"restore_note,omitempty"`
	// Stitch says whether saved passage KV was used: "" (the setting is
	// off), "on", or "refused" (StitchNote says why). Stitched passages
	// were placed from their saved KV, StitchedTokens of them not read,
	// RepairedTokens read again in place; UncachedPassages had no saved KV
	// yet and were read.
	Stitch           string `json:"stitch,omitempty"`
	StitchNote       string `json:"stitch_note,omitempty"`
	StitchedPassages int    `json:"stitched_passages,omitempty"`
	StitchedTokens   int    `json:"stitched_tokens,omitempty"`
	RepairedTokens   int    `json:"repaired_tokens,omitempty"`
	UncachedPassages int    `json:"uncached_passages,omitempty"`
	// Speculation (Settings.Speculate): how the drafts were made (draft
	// model or prompt lookup), how many the model kept, the route's
	// acceptance over its recent answers (absent until enough was drafted)
	// and whether it ran: on, off below the floor until a retry, or
	// switched off by this answer.
	SpecMode        string   `json:"spec_mode,omitempty"`
	Drafted         int      `json:"drafted,omitempty"`
	Accepted        int      `json:"accepted,omitempty"`
	DraftAcceptRate *float64 `json:"draft_accept_rate,omitempty"`
	SpecNote        string   `json:"spec_note,omitempty"`
	Error           string   `json:"error,omitempty"`
	// Support is the share of the answer's checked sentences whose words
	// mostly occur in the passages they cite (CheckSupport): absent when no
	// sentence could be checked, for an extractive answer and for one that
	// did not finish. CheckedSentences, SupportedSentences and
	// UncitedSentences are its counts.
	Support            *float64 `json:"support,omitempty"`
	CheckedSentences   int      `json:"checked_sentences,omitempty"`
	SupportedSentences int      `json:"supported_sentences,omitempty"`
	UncitedSentences   int      `json:"uncited_sentences,omitempty"`

	Stages      map[string]float64 `json:"stages"`
	StageStarts map[string]float64 `json:"stage_starts"`
	// Skipped says why a stage of the question's path (seedStages) did not
	// run; its Stages entry is then 0, so every trace has the same rows.
	Skipped map[string]string `json:"skipped_stages,omitempty"`
}

// Fallback is how far a question's path fell back from the full pipeline
// (docs/design.md, "Fallback levels"); a trace keeps the worst it reached.
type Fallback int

const (
	FallbackNone       Fallback = iota // the full pipeline
	FallbackRerank                     // rerank skipped, or a remote stage answered by the local stand-in
	FallbackBM25                       // BM25 only: no query embedding
	FallbackExtractive                 // no generation model: the best passages, quoted
)

// seedStages are the stages every question's trace carries, run or not.
var seedStages = []string{StageQueue, StageEmbed, StageVector, StageBM25, StageRetrieval, StageRerank, StageAssemble,
	StagePrefill, StageFirstDecode, StageTTFT}

// Stage names, as they appear in traces, the API and metrics.
const (
	StageQueue       = "queue_ms"
	StageEmbed       = "embed_ms"
	StageVector      = "vector_ms"
	StageBM25        = "bm25_ms"
	StageRetrieval   = "retrieval_ms"
	StageRerank      = "rerank_ms"
	StageAssemble    = "prompt_assemble_ms"
	StageTokenize    = "tokenize_ms"
	StagePrefill     = "prefill_ms"
	StageRestore     = "restore_ms" // before prefill: placing an earlier question's kept state
	StageStitch      = "stitch_ms"  // part of prefill: placing saved passage KV
	StageFirstDecode = "first_decode_ms"
	StageRunnerRTT   = "runner_rtt_ms"
	StageLLMTTFT     = "llm_ttft_ms"
	StageFlush       = "flush_ms"
	StageTTFT        = "ttft_ms"
	StageDecode      = "decode_ms"
	StageTotal       = "total_ms"
	StageUITTFT      = "ui_ttft_ms"
	StagePaint       = "paint_ms"
)

// recorder fills a Trace's stages and mirrors each as an OpenTelemetry span
// under the request's span. It is safe for the parallel retrieval stages.
type recorder struct {
	mu     sync.Mutex
	t      *Trace
	t0     time.Time
	ctx    context.Context // carries the request span
	tracer trace.Tracer
}

func newRecorder(ctx context.Context, tracer trace.Tracer, t *Trace) *recorder {
	t.Stages = map[string]float64{}
	t.StageStarts = map[string]float64{}
	return &recorder{t: t, t0: t.Received, ctx: ctx, tracer: tracer}
}

// add records a stage that ran from start to end.
func (r *recorder) add(name string, start, end time.Time) {
	r.set(name, ms(end.Sub(start)), ms(start.Sub(r.t0)))
}

// set records a stage of d ms starting offset ms after the request
// arrived, also when it was measured elsewhere (inside the runner), and
// exports it as a span.
func (r *recorder) set(name string, d, offset float64) {
	offset = max(offset, 0)
	r.mu.Lock()
	r.t.Stages[name] = round(d)
	r.t.StageStarts[name] = round(offset)
	r.mu.Unlock()
	start := r.t0.Add(time.Duration(offset * float64(time.Millisecond)))
	_, span := r.tracer.Start(r.ctx, trimMs(name), trace.WithTimestamp(start))
	span.End(trace.WithTimestamp(start.Add(time.Duration(d * float64(time.Millisecond)))))
}

// skip records that a stage did not run, and why (a stage said skipped
// once keeps its first reason).
func (r *recorder) skip(name, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ran := r.t.Stages[name]; ran {
		return
	}
	r.t.Stages[name] = 0
	if r.t.Skipped == nil {
		r.t.Skipped = map[string]string{}
	}
	r.t.Skipped[name] = reason
}

// since is the offset of t from the request's receipt, in milliseconds.
func (r *recorder) since(t time.Time) float64 { return ms(t.Sub(r.t0)) }

func (r *recorder) attrs() []attribute.KeyValue {
	t := r.t
	return []attribute.KeyValue{
		attribute.String("lore.request_id", t.RequestID),
		attribute.Int64("lore.workspace_id", t.WorkspaceID),
		attribute.String("lore.version_id", t.VersionID),
		attribute.String("lore.route", t.Route),
		attribute.String("lore.route_role", t.RouteRole),
		attribute.Int("lore.fallback_level", int(t.FallbackLevel)),
		attribute.String("lore.fallback_reason", t.FallbackReason),
		attribute.Int("lore.prompt_tokens", t.PromptTokens),
		attribute.Int("lore.cached_tokens", t.CachedTokens),
		attribute.Int("lore.context_chunks", t.ContextChunks),
		attribute.Bool("lore.embed_cache_hit", t.EmbedCacheHit),
		attribute.Bool("lore.retrieval_cache_hit", t.RetrievalCacheHit),
		attribute.String("lore.spec_note", t.SpecNote),
	}
}

func trimMs(name string) string {
	if len(name) > 3 && name[len(name)-3:] == "_ms" {
		return name[:len(name)-3]
	}
	return name
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func round(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }
