// Package wire is the protocol between the engine (parent) and a model
// runner (child process): one JSON object per line, requests on the runner's
// stdin, replies on its stdout. The runner serves one request at a time; a
// "cancel" line may arrive while a request runs. It is a leaf package so that
// the runner and the engine share it without importing each other.
//
// Ops:
//
//	load        Load → Done
//	tokenize    Text, Special → Tokens
//	probe       Text → Tokens, Stats (PromptTokens, and in CachedTokens/AdoptedSeq
//	            the longest prefix of Text held by any sequence); evaluates nothing
//	prefill     Text, Seq, Batch → Stats. A cancel stops it between micro-batches
//	            and keeps what was evaluated (StopReason "cancel").
//	generate    Text, Seq, Sampling, MaxTokens, Stop[, Segments, Repair, Scratch, Logits]
//	            → Plan, Piece…, Stats. With Segments, passages whose KV was
//	            saved by passage_kv are stitched in instead of evaluated (by
//	            way of sequence Scratch). Stitched cells are approximate: a
//	            later prompt reuses them only when stitched with the same Repair.
//	            With Restore, the state kept under that name is first placed in
//	            Seq when it holds more of the prompt than any sequence does;
//	            with KeepAs, the sequence's state is kept in the runner's memory
//	            under that name once the answer is sent, within Load's KeepBytes
//	            (Stats.Kept: the names kept).
//	passage_kv  Text (the prefix), Texts[0] (the passage), Seq[, Path, Batch] →
//	            Tokens (prefix and passage), Pos (where the passage starts),
//	            State (or the bytes written to Path), Stats: the passage's KV
//	            evaluated after the prefix, without the prefix's cells
//	state_save  Seq[, Path] → Tokens, State (or the bytes written to Path), Stats
//	state_load  Seq, Tokens, State (or Path) → Stats (Restored, RestoreMs)
//	seq_trim    Seq, Keep → Done: the sequence keeps its first Keep tokens
//	seqs        → SeqTokens (tokens held per sequence)
//	embed       Texts → Vectors
//	rerank      Query, Texts → Scores
//	cancel      ID of the request to stop
package wire

// LoadParams configures the model a runner loads.
type LoadParams struct {
	Path string `json:"path"`
	// NumCtx is the most tokens one sequence may hold (prompt and answer).
	NumCtx int `json:"num_ctx"`
	// KVCells is the size of the KV cache all sequences share (0: NumCtx).
	// With Seqs > 1 the cache is unified: a sequence may use any free cell,
	// and cells copied between sequences are shared, not duplicated.
	KVCells   int `json:"kv_cells,omitempty"`
	Batch     int `json:"batch"`
	Seqs      int `json:"seqs"`
	Threads   int `json:"threads"`
	GPULayers int `json:"gpu_layers"`
	// FlashAttention is "auto", "on" or "off".
	FlashAttention string `json:"flash_attention"`
	// Pooling is the GGUF pooling type (0 none, 1 mean, 2 cls, 3 last, 4 rank),
	// read by the parent from the validated header.
	Pooling int `json:"pooling"`
	// Draft, if set, is a GGUF model with the same vocabulary (checked by the
	// parent) that proposes the tokens of Speculate instead of prompt lookup.
	Draft string `json:"draft,omitempty"`
	// KeepBytes bounds the states generate keeps in the runner's memory
	// (Request.KeepAs), least recently used out first; 0 keeps none.
	KeepBytes int64 `json:"keep_bytes,omitempty"`
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
	Op string `json:"op"` // see the package comment

	Load *LoadParams `json:"load,omitempty"`

	Text    string   `json:"text,omitempty"`    // tokenize, probe, prefill, generate: a rendered prompt
	Special bool     `json:"special,omitempty"` // tokenize: parse control tokens
	Texts   []string `json:"texts,omitempty"`   // embed, rerank (documents)
	Query   string   `json:"query,omitempty"`   // rerank

	// Seq is the sequence a prefill, generate or state op works on.
	Seq int `json:"seq,omitempty"`
	// Batch, if smaller than the loaded batch, is the prefill's micro-batch:
	// a cancel is noticed between micro-batches.
	Batch int `json:"batch,omitempty"`
	// Marks are byte offsets in a prefill's Text (in order) that its
	// Progress counts: how many of them the sequence holds the text up to.
	Marks     []int    `json:"marks,omitempty"`
	Sampling  Sampling `json:"sampling"`
	MaxTokens int      `json:"max_tokens,omitempty"`
	// Trim lists sequences that prefill and generate cut back to their
	// common prefix with the prompt before evaluating it: their other cells
	// would cost attention work (the cache is unified) and are stale.
	Trim []int    `json:"trim,omitempty"`
	Keep int      `json:"keep,omitempty"` // seq_trim
	Stop []string `json:"stop,omitempty"`

	// state_load: the tokens the state holds and the state itself, inline
	// (base64 in JSON) or in the file at Path. state_save writes to Path
	// when it is set.
	Tokens []int  `json:"tokens,omitempty"`
	State  []byte `json:"state,omitempty"`
	Path   string `json:"path,omitempty"`

	// Segments split a generate's Text (their concatenation) so that
	// passages with a saved KV state are stitched in; Repair is how many
	// of each stitched passage's first tokens are evaluated again, in
	// place (EPIC's repair: the passage's opening tokens attend to the
	// real text before them). A passage of Repair tokens or fewer is
	// evaluated in full. Scratch is the sequence the states are loaded
	// into on the way: whatever it held is cleared.
	Segments []Segment `json:"segments,omitempty"`
	Repair   int       `json:"repair,omitempty"`
	Scratch  int       `json:"scratch,omitempty"`
	// KeepAs, for generate, keeps the sequence's state in the runner's
	// memory under this name once the answer is sent (a later generate's
	// Restore); Restore names a kept state to place in Seq before the
	// prompt is read, when it holds more of the prompt than any sequence
	// does (Stats.Restored; Stats.RestoreSkipped says why not).
	KeepAs  string `json:"keep_as,omitempty"`
	Restore string `json:"restore,omitempty"`
	// Logits asks a generate for the first sampled token's logits and the
	// sampled tokens (Reply.Logits, Reply.Tokens).
	Logits bool `json:"logits,omitempty"`
	// Speculate, for a greedy generate, drafts up to that many tokens per
	// step, with the draft model when one is loaded (LoadParams.Draft), else
	// by prompt lookup (what followed the last two or three tokens where
	// they occurred before, in the prompt or the answer), and verifies them
	// in the same batch as the next token: each draft token is kept only
	// where greedy decoding picks it anyway.
	Speculate int `json:"speculate,omitempty"`
}

// Segment is one piece of a stitched prompt. Path, when set, is a state
// file passage_kv wrote for this text: Tokens are the prefix and passage
// tokens it was evaluated as, Pos where the passage starts in them.
type Segment struct {
	Text   string `json:"text"`
	Path   string `json:"path,omitempty"`
	Tokens []int  `json:"tokens,omitempty"`
	Pos    int    `json:"pos,omitempty"`
}

// Reply is one line sent back by a runner. A streamed generation sends
// replies with Piece set and ends with one that has Done set.
type Reply struct {
	Error string `json:"error,omitempty"`

	Tokens    []int       `json:"tokens,omitempty"`
	Piece     string      `json:"piece,omitempty"`
	Done      bool        `json:"done,omitempty"`
	Stats     *Stats      `json:"stats,omitempty"`
	Plan      *Stats      `json:"plan,omitempty"` // sent before prefill: prompt, cached and eval tokens
	Vectors   [][]float32 `json:"vectors,omitempty"`
	Scores    []float32   `json:"scores,omitempty"`
	State     []byte      `json:"state,omitempty"`      // state_save without Path
	SeqTokens []int       `json:"seq_tokens,omitempty"` // seqs
	Pos       int         `json:"pos,omitempty"`        // passage_kv
	Logits    []float32   `json:"logits,omitempty"`     // generate with Logits
	Progress  *Progress   `json:"progress,omitempty"`   // prefill in micro-batches: after each
}

// Progress is how far a prefill in micro-batches has got: the sequence
// holds Held of the prompt's Total tokens, and the text up to Marks of the
// request's marks (nil: the request had none, or they could not be
// placed in the prompt's tokens).
type Progress struct {
	Held  int  `json:"held"`
	Total int  `json:"total"`
	Marks *int `json:"marks,omitempty"`
}

// Stats reports what one prefill or generation cost. Times are milliseconds.
type Stats struct {
	PromptTokens int `json:"prompt_tokens"`
	// CachedTokens were reused from the KV cache: the sequence's own, or
	// AdoptedTokens copied from sequence AdoptedSeq (a speculative prefill,
	// say). AdoptedTokens is 0 when nothing was adopted.
	CachedTokens  int `json:"cached_tokens"`
	AdoptedSeq    int `json:"adopted_seq"`
	AdoptedTokens int `json:"adopted_tokens"`
	EvalTokens    int `json:"eval_tokens"`   // evaluated now
	DecodeTokens  int `json:"decode_tokens"` // generated
	// Evicted counts sequences cleared to make room in a full KV cache.
	Evicted int `json:"evicted,omitempty"`

	TokenizeMs    float64 `json:"tokenize_ms"`
	PrefillMs     float64 `json:"prefill_ms"`
	FirstDecodeMs float64 `json:"first_decode_ms"` // sampling and emitting the first token after prefill
	TTFTMs        float64 `json:"ttft_ms"`         // runner-side: request read to first piece written
	DecodeMs      float64 `json:"decode_ms"`
	DecodeTokS    float64 `json:"decode_tok_s"`
	// Drafted and Accepted count speculative draft tokens (Speculate).
	// SpecAcceptRate (the engine's) is the acceptance over its recent
	// window, -1 when unknown; SpecNote says whether speculation ran.
	// SpecMode is how the drafts were made: "draft model" or "prompt lookup".
	SpecMode string `json:"spec_mode,omitempty"`
	// DraftReadTokens and DraftReadMs are what the draft model read of
	// the prompt and answer to catch up before drafting (part of DecodeMs:
	// it keeps its cache between answers, so a shared prefix is read once).
	DraftReadTokens int     `json:"draft_read_tokens,omitempty"`
	DraftReadMs     float64 `json:"draft_read_ms,omitempty"`
	Drafted         int     `json:"drafted,omitempty"`
	Accepted        int     `json:"accepted,omitempty"`
	SpecAcceptRate  float64 `json:"spec_accept_rate"`
	SpecNote        string  `json:"spec_note,omitempty"`
	// LlamaMs is the time spent inside llama_decode and sampling up to the
	// first token; the rest of TTFT is the engine's own overhead.
	LlamaMs float64 `json:"llama_ms"`

	// KV state transfers (state_save, state_load, and Warm through a store).
	// Restored says the tokens came from a saved state, not a prefill
	// (state_load, or a generate's Restore);
	// RestoreMs and SaveMs are the runner's llama.cpp calls plus transfer,
	// StateBytes the size of the state.
	Restored   bool    `json:"restored,omitempty"`
	RestoreMs  float64 `json:"restore_ms,omitempty"`
	SaveMs     float64 `json:"save_ms,omitempty"`
	StateBytes int     `json:"state_bytes,omitempty"`
	// RestoreSkipped says why a generate's Restore was not placed; Kept
	// names the states the runner keeps after its KeepAs, most recently
	// used first.
	RestoreSkipped string   `json:"restore_skipped,omitempty"`
	Kept           []string `json:"kept,omitempty"`

	// Stitching (generate with Segments): passages placed from saved KV,
	// their tokens that were not evaluated, the opening tokens evaluated
	// again, the time spent placing them, and why stitching was skipped
	// for the whole prompt ("" when it was not).
	StitchedPassages int     `json:"stitched_passages,omitempty"`
	StitchedTokens   int     `json:"stitched_tokens,omitempty"`
	RepairedTokens   int     `json:"repaired_tokens,omitempty"`
	StitchMs         float64 `json:"stitch_ms,omitempty"`
	StitchSkipped    string  `json:"stitch_skipped,omitempty"`
	// UncachedPassages had no saved KV and were evaluated (parent).
	UncachedPassages int `json:"uncached_passages,omitempty"`

	// Filled in by the parent.
	QueueMs     float64 `json:"queue_ms"`
	RunnerRTTMs float64 `json:"runner_rtt_ms"` // client-observed TTFT minus runner TTFT
	ClientTTFT  float64 `json:"client_ttft_ms"`
	StopReason  string  `json:"stop_reason"` // eos, stop, length, cancel, preempted, superseded
}
