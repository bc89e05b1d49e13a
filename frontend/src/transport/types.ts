// Types mirror docs/api.md exactly. Anything the contract leaves open is marked "contract:".

export type StageName =
  | 'queue'
  | 'embed'
  | 'vector'
  | 'bm25'
  | 'retrieval'
  | 'rerank'
  | 'prompt_assemble'
  | 'prefill'
  | 'generate';

export interface AskRequest {
  question: string;
  workspace: string;
  chat_id?: number;
  /** auto (default: the router's rules), main or fast. */
  route?: 'auto' | 'main' | 'fast';
}

export interface PrefetchRequest {
  draft: string;
  workspace: string;
  chat_id?: number;
}

/** GET /api/prefetch (and each `status` event of GET /api/prefetch/events): what the drafts have read ahead for the next question. */
export interface PrefetchStatus {
  /** none (nothing for the next question), reading, ready, stopped (part-way; what was read counts). */
  state: 'none' | 'reading' | 'ready' | 'stopped' | string;
  passages: number;
  /** Of the passages, read so far (as the runner last reported). */
  read: number;
  tokens: number;
  read_tokens: number;
}

/** `trace` event: first, at once. */
export interface TraceStart {
  request_id: string;
  chat_id: number;
}

export interface PrefillDetail {
  prompt_tokens: number;
  cached_tokens: number;
  eval_tokens: number;
  expected_ms: number;
}

export interface StageEvent {
  name: StageName | string;
  state: 'start' | 'done';
  ms?: number;
  detail?: Partial<PrefillDetail> & { sources?: number } & Record<string, unknown>;
}

export interface SourceScores {
  bm25?: number;
  vector?: number;
  rerank?: number;
  fused?: number;
}

export interface Source {
  n: number;
  chunk_id: number;
  document: string;
  path: string;
  page?: number;
  heading?: string;
  line_start?: number;
  line_end?: number;
  text: string;
  scores?: SourceScores;
}

/** Keys of `stages` / `stage_starts` (all in ms). */
export type StageKey =
  | 'queue_ms'
  | 'embed_ms'
  | 'vector_ms'
  | 'bm25_ms'
  | 'retrieval_ms'
  | 'rerank_ms'
  | 'prompt_assemble_ms'
  | 'tokenize_ms'
  | 'restore_ms'
  | 'prefill_ms'
  | 'stitch_ms'
  | 'first_decode_ms'
  | 'runner_rtt_ms'
  | 'llm_ttft_ms'
  | 'flush_ms'
  | 'ttft_ms'
  | 'decode_ms'
  | 'total_ms'
  | 'ui_ttft_ms'
  | 'paint_ms';

export type StageMap = Partial<Record<StageKey, number>> & Record<string, number | undefined>;

export interface Trace {
  request_id: string;
  workspace_id?: number;
  chat_id?: number;
  question?: string;
  version_id?: string;
  /** The model that answered. */
  route?: string;
  /** main or fast: the chat model the router picked; route_reason says why. */
  route_role?: 'main' | 'fast' | string;
  route_reason?: string;
  /** The reranker that ran when rerank is remote: "remote:URL#MODEL", or "LOCAL-ID (fallback from remote:…)" / "none (fallback from remote:…)" when the remote failed (fallback_reason says why). Absent with a local reranker alone. */
  rerank_route?: string;
  /** Speculative decoding: how drafts were made ("draft model", "prompt lookup"), how many were kept, the route's recent acceptance (0–1, absent until measured) and whether it ran. */
  spec_mode?: string;
  drafted?: number;
  accepted?: number;
  draft_accept_rate?: number;
  spec_note?: string;
  fallback_level?: number;
  fallback_reason?: string;
  prompt_tokens?: number;
  cached_tokens?: number;
  eval_tokens?: number;
  context_chunks?: number;
  context_budget?: number;
  /** Where the passage budget came from: setting, measured, measured earlier (a former run), assumed. */
  context_budget_from?: string;
  embed_cache_hit?: boolean;
  retrieval_cache_hit?: boolean;
  first_token_at?: string;
  stages: StageMap;
  stage_starts?: StageMap;
  /** Why a stage of the question's path did not run (its stage is then 0 ms), by stage key. */
  skipped_stages?: Record<string, string>;
  decode_tokens?: number;
  decode_tok_s?: number;
  /**
   * hit, partial, miss or none: whether the prompt up to the question was read while the user typed; partial when
   * the question brought passages the drafts had not (prefetch_new_passages), read after Enter.
   */
  prefetch?: 'hit' | 'partial' | 'miss' | 'none' | string;
  prefetch_miss?: string;
  prefetched_tokens?: number;
  prefetch_age_ms?: number;
  prefetch_new_passages?: number;
  /** Passages kept because a sequence held them (still candidates, not among the best). */
  stale_passages?: number;
  /** Passages among the best left out: reading them would have missed the first-token budget. */
  late_passages?: number;
  /** The best passage, cut for the same budget: the run of `words` words from word `from` (the one with the most of
   * the question's words) stayed, `tokens` fewer than the whole. */
  cut?: { chunk_id: number; from: number; words: number; tokens: number };
  /** Tokens of an earlier question's kept state (another chat's prompt that starts the same) placed before reading:
   * exact, part of cached_tokens. restore_note says why a kept state was not placed. */
  restored_tokens?: number;
  restore_note?: string;
  /** Saved passage KV: '' (setting off), on, or refused (stitch_note says why). Approximate. */
  stitch?: 'on' | 'refused' | string;
  stitch_note?: string;
  stitched_passages?: number;
  /** Prompt tokens placed from saved passage KV instead of read; repaired ones were read again. */
  stitched_tokens?: number;
  repaired_tokens?: number;
  uncached_passages?: number;
  /**
   * How well the answer is backed by the passages it cites (0–1): the share of its checked sentences whose content
   * words mostly occur in their cited passages (app.CheckSupport). Absent when no sentence could be checked, for an
   * extractive answer and for one that did not finish; the counts are absent when 0.
   */
  support?: number;
  checked_sentences?: number;
  supported_sentences?: number;
  /** Of the checked sentences, those citing no source (checked against every passage). */
  uncited_sentences?: number;
}

export interface Percentiles {
  p50: number;
  p95: number;
  p99: number;
  n: number;
}

export interface HistogramBucket {
  /** Upper bound in ms; contract: the last bucket may be open (null / "+Inf"). */
  le: number | string | null;
  count: number;
}

/** Percentiles of one group of traces (a prompt-length bucket, a fallback level): store.Stats. */
export interface GroupStats {
  n: number;
  ttft: Percentiles;
  total: Percentiles;
  /** Per stage key (`prefill_ms`, …), over the group's traces that recorded it. */
  stages: Record<string, Percentiles>;
}

export interface TraceStats {
  window?: string;
  n?: number;
  stages: Record<string, Percentiles>;
  /** Keyed by prompt-length bucket: "<512", "512-1023", "1024-2047", "2048-4095", ">=4096". */
  by_bucket?: Record<string, GroupStats>;
  /** Keyed by fallback level: "0", "1", … */
  by_fallback?: Record<string, GroupStats>;
  /** Keyed by prefetch outcome: "hit", "partial", "miss", "none". */
  by_prefetch?: Record<string, GroupStats>;
  /** Keyed by the router's pick: "main", "fast". */
  by_route?: Record<string, GroupStats>;
  ttft_histogram?: HistogramBucket[];
  caches?: { retrieval?: HitRate; embedding?: HitRate };
  support?: SupportStats;
}

/** The support scores of a window's answers that have one (app.SupportStats); mean and low_rate are 0 with none. */
export interface SupportStats {
  n: number;
  mean: number;
  /** Answers scored under 0.5 (app.LowSupport), and their share. */
  low: number;
  low_rate: number;
}

/** Cache hits out of lookups over a window (app.HitRate). */
export interface HitRate {
  lookups: number;
  hits: number;
  rate: number;
}

export interface Workspace {
  id: number;
  name: string;
  folders: string[];
  documents: number;
  chunks: number;
  /** A run is going on now. */
  indexing?: boolean;
  /** When a question was last asked in it (absent: never). */
  last_used?: string;
}

export interface ProgressError {
  path: string;
  reason: string;
}

export interface Progress {
  phase?: string;
  files_done?: number;
  files_total?: number;
  chunks?: number;
  files_per_s?: number;
  eta_s?: number;
  current?: string;
  error?: ProgressError | null;
}

export interface DocumentInfo {
  id: number;
  path: string;
  /** The path relative to its folder. */
  rel?: string;
  /** Its title from its content (a heading, the document's own title), else its file name. */
  title?: string;
  status: string;
  error?: string;
  chunks: number;
}

export interface ChatSummary {
  id: number;
  title: string;
  created: string;
  updated?: string;
  /** A search result's piece of its best matching turn ('' or absent when the title matched). */
  snippet?: string;
  /** How many questions it holds, and the latest (its first 120 characters): chats that start alike told apart. */
  questions?: number;
  last?: string;
}

export interface ChatMessage {
  role: 'user' | 'assistant' | string;
  content: string;
  request_id?: string;
  created?: string;
  /** An answer's sources as it showed them; a text is '' when the chat did not keep it (the chunk has it). */
  sources?: Source[];
  /** The user stopped the answer: content is what came before. */
  stopped?: boolean;
  /** The answer's stored trace (its timings), when there is one. */
  trace?: Trace;
}

export interface Chat {
  id: number;
  messages: ChatMessage[];
}

/** contract: "a passage with its location" — assumed to have Source's fields. */
export type Chunk = Partial<Source> & { chunk_id?: number; id?: number; text: string };

export interface ModelInfo {
  path: string;
  name: string;
  source?: string;
  architecture?: string;
  params?: number | string;
  quantization?: string;
  size?: number;
  context_length?: number;
  ram_estimate?: number;
  fits_in_ram?: boolean;
  kind: 'chat' | 'embedding' | 'rerank' | string;
}

/** GET /api/system: the CPU, the runner builds (engine/cpu) and the models in use. */
export interface SystemInfo {
  cpu: {
    features: string;
    variants: Array<{ name: string; about: string; opt_in: boolean; supported: boolean; installed: boolean }>;
    best: string;
    runner: string;
    variant: string;
    error?: string;
  };
  loaded: Array<{ role: string; path: string; cpu_variant: string; runner: { system: string; weight_buffers: string[] | null } }>;
  /** false when a role is served by a remote (OpenAI-compatible) server: remote says which, where, and what it receives. */
  local?: boolean;
  remote?: Array<{ role: string; url: string; what: string }>;
  /** The background saving of passages' KV (Settings → passage_kv). */
  passage_kv?: { queued: number; saving: boolean; saved: number; failed: number };
}

export interface Settings {
  chat_model: string;
  /** A smaller chat model the router may pick ('' none). */
  fast_chat_model?: string;
  embed_model: string;
  rerank_model: string;
  top_k: number;
  rerank_k: number;
  /** Rerank is skipped when its measured cost × rerank_k would exceed this (0: no budget). */
  rerank_budget_ms: number;
  /** HNSW beam; 0: the index's default. */
  ef_search: number;
  /** Token budget for passages; 0: sized from the measured prefill speed (about 1 s of reading). */
  context_tokens: number;
  /** Longest answer in tokens; 0: up to the context. */
  max_tokens: number;
  threads: number;
  gpu_layers: number;
  /** Stitch saved passage KV into prompts (approximate; off by default). */
  passage_kv: boolean;
  /** Tokens at the start of each stitched passage read again. */
  passage_repair: number;
  /** Router: the fast model answers when the main one would read past this (0: no budget). */
  route_ttft_ms: number;
  /** Router: questions of at most this many words that start a chat go to the fast model (0: off). */
  route_short_words: number;
  /** Speculative decoding: tokens drafted a step (0: off). */
  speculate: number;
  /** The main model's draft model ('' : prompt lookup). */
  draft_model?: string;
  /** Acceptance (percent) below which speculation switches itself off. */
  spec_floor_pct: number;
}

/** recall@10 and latency per efSearch, per corpus size (app.HNSWSweep). */
export interface HNSWSweep {
  measured_at: string;
  cpu: string;
  sizes: Array<{
    n: number;
    dim: number;
    build_s: number;
    exact_p95_ms: number;
    points: Array<{ ef_search: number; recall_at_10: number; p50_ms: number; p95_ms: number }>;
  }>;
}

export interface AskCallbacks {
  onTrace(t: TraceStart): void;
  onStage(s: StageEvent): void;
  onSources(s: Source[]): void;
  onToken(text: string): void;
  onDone(trace: Trace): void;
  onError(message: string): void;
}

export interface AskHandle {
  /** Stops the answer: aborts the stream and asks the server to cancel generation. No callback fires after. */
  cancel(): void;
  /** Settles once the stream has ended (done, error, cancel). Never rejects. */
  finished: Promise<void>;
}

export interface ProgressCallbacks {
  onProgress(p: Progress): void;
  onDone(summary: unknown): void;
  onError?(message: string): void;
}

export interface Transport {
  readonly kind: 'http' | 'wails';
  /** Desktop only: the native folder picker and "Open file". */
  readonly desktop: boolean;

  ask(req: AskRequest, cb: AskCallbacks): AskHandle;
  cancel(requestId: string): Promise<void>;
  reportUITTFT(requestId: string, uiTTFTms: number, paintMs: number): Promise<void>;
  /** Speculative prefill of a draft question (fire and forget; errors are the caller's to ignore). */
  prefetch(req: PrefetchRequest): Promise<void>;
  /**
   * Follows what the drafts have read ahead: the status now, then after every change; returns an unsubscribe
   * function. onEnd hears when the stream ended by itself (refused, the server gone): subscribe again to go on.
   */
  watchReadAhead(onStatus: (st: PrefetchStatus) => void, onEnd?: () => void): () => void;

  workspaces(): Promise<Workspace[]>;
  createWorkspace(name: string): Promise<void>;
  /** Renames a workspace: 409 when the name is taken, 400 with the naming rule when it is not allowed. */
  renameWorkspace(workspace: string, name: string): Promise<void>;
  /** Deletes a workspace and Lore's index, chats and traces of it (the files stay). */
  deleteWorkspace(workspace: string): Promise<void>;
  /** HTTP: `path` is required. Wails: the path is ignored; Go opens the native picker. Returns the folder added ('' if cancelled). */
  addFolder(workspace: string, path?: string): Promise<string>;
  removeFolder(workspace: string, path: string): Promise<void>;
  reindex(workspace: string): Promise<void>;
  /** Subscribes to indexing progress; returns an unsubscribe function. */
  watchProgress(workspace: string, cb: ProgressCallbacks): () => void;
  documents(workspace: string): Promise<DocumentInfo[]>;

  chats(workspace: string): Promise<ChatSummary[]>;
  /** The workspace's chats whose title or turns hold every word of query (the last may be unfinished), newest first. */
  searchChats(workspace: string, query: string): Promise<ChatSummary[]>;
  chat(id: number): Promise<Chat>;
  chunk(id: number): Promise<Chunk>;
  /** Desktop only. */
  openSource(chunkID: number): Promise<void>;

  traces(limit: number): Promise<Trace[]>;
  trace(requestId: string): Promise<Trace>;
  traceStats(window: string): Promise<TraceStats>;

  models(): Promise<ModelInfo[]>;
  system(): Promise<SystemInfo>;
  settings(): Promise<Settings>;
  /** The efSearch trade-off `lore bench retrieval --sweep` last measured here (no sizes: never). */
  hnswSweep(): Promise<HNSWSweep>;
  saveSettings(s: Settings): Promise<void>;
}

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly retryAfterS?: number,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}
