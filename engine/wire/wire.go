// Package wire is the protocol between the engine (parent) and a model
// runner (child process): one JSON object per line, requests on the runner's
// stdin, replies on its stdout. The runner serves one request at a time; a
// "cancel" line may arrive while a generation streams. It is a leaf package
// so that the runner and the engine share it without importing each other.
package wire

// LoadParams configures the model a runner loads.
type LoadParams struct {
	Path      string `json:"path"`
	NumCtx    int    `json:"num_ctx"`
	Batch     int    `json:"batch"`
	Seqs      int    `json:"seqs"`
	Threads   int    `json:"threads"`
	GPULayers int    `json:"gpu_layers"`
	// FlashAttention is "auto", "on" or "off".
	FlashAttention string `json:"flash_attention"`
	// Pooling is the GGUF pooling type (0 none, 1 mean, 2 cls, 3 last, 4 rank),
	// read by the parent from the validated header.
	Pooling int `json:"pooling"`
}

// Sampling holds the sampler settings. Temperature 0 means greedy.
type Sampling struct {
	Temperature float32 `json:"temperature"`
	TopK        int     `json:"top_k"`
	TopP        float32 `json:"top_p"`
	Seed        uint32  `json:"seed"`
}

// Request is one line sent to a runner.
type Request struct {
	ID uint64 `json:"id"`
	Op string `json:"op"` // load, tokenize, prefill, generate, embed, rerank, cancel

	Load *LoadParams `json:"load,omitempty"`

	Text    string   `json:"text,omitempty"`    // tokenize, prefill, generate: a rendered prompt
	Special bool     `json:"special,omitempty"` // tokenize: parse control tokens
	Texts   []string `json:"texts,omitempty"`   // embed, rerank (documents)
	Query   string   `json:"query,omitempty"`   // rerank

	Seq       int      `json:"seq,omitempty"`
	Sampling  Sampling `json:"sampling"`
	MaxTokens int      `json:"max_tokens,omitempty"`
	Stop      []string `json:"stop,omitempty"`
}

// Reply is one line sent back by a runner. A streamed generation sends
// replies with Piece set and ends with one that has Done set.
type Reply struct {
	Error string `json:"error,omitempty"`

	Tokens  []int       `json:"tokens,omitempty"`
	Piece   string      `json:"piece,omitempty"`
	Done    bool        `json:"done,omitempty"`
	Stats   *Stats      `json:"stats,omitempty"`
	Plan    *Stats      `json:"plan,omitempty"` // sent before prefill: prompt, cached and eval tokens
	Vectors [][]float32 `json:"vectors,omitempty"`
	Scores  []float32   `json:"scores,omitempty"`
}

// Stats reports what one prefill or generation cost. Times are milliseconds.
type Stats struct {
	PromptTokens int `json:"prompt_tokens"`
	CachedTokens int `json:"cached_tokens"` // reused from the KV cache
	EvalTokens   int `json:"eval_tokens"`   // evaluated now
	DecodeTokens int `json:"decode_tokens"` // generated

	TokenizeMs    float64 `json:"tokenize_ms"`
	PrefillMs     float64 `json:"prefill_ms"`
	FirstDecodeMs float64 `json:"first_decode_ms"` // sampling and emitting the first token after prefill
	TTFTMs        float64 `json:"ttft_ms"`         // runner-side: request read to first piece written
	DecodeMs      float64 `json:"decode_ms"`
	DecodeTokS    float64 `json:"decode_tok_s"`
	// LlamaMs is the time spent inside llama_decode and sampling up to the
	// first token; the rest of TTFT is the engine's own overhead.
	LlamaMs float64 `json:"llama_ms"`

	// Filled in by the parent.
	QueueMs     float64 `json:"queue_ms"`
	RunnerRTTMs float64 `json:"runner_rtt_ms"` // client-observed TTFT minus runner TTFT
	ClientTTFT  float64 `json:"client_ttft_ms"`
	StopReason  string  `json:"stop_reason"` // eos, stop, length, cancel
}
