// Speculative prefill while the user types: the draft question goes to the server (POST /api/prefetch, or the
// desktop's Prefetch binding), which retrieves for it and reads the prompt up to the question into the model, so
// that on Enter only the question is left to read. The rule below is replayed by `lore bench ttft` (typed); keep
// the two in step (app/typing.go).

/** Milliseconds of no typing after which the draft is sent. */
export const IDLE_MS = 250;
/** The shortest draft worth sending, in words. */
export const MIN_WORDS = 3;

/**
 * Decides when a draft is sent: once it has MIN_WORDS words, when a word has just been completed (a space or
 * punctuation typed) or typing has paused IDLE_MS; never the same draft twice in a row. The server does nothing
 * for a draft whose passages it is already reading, and rate-limits clients.
 */
export class DraftPrefetcher {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private lastSent = '';

  constructor(private readonly send: (draft: string) => void) {}

  /** Call on every edit with the whole draft. */
  input(text: string): void {
    this.clearTimer();
    const draft = text.trim();
    if (words(draft) < MIN_WORDS) return;
    if (/[\s.,;:!?]$/.test(text)) {
      this.fire(draft);
      return;
    }
    this.timer = setTimeout(() => this.fire(draft), IDLE_MS);
  }

  /** The question was submitted (or abandoned): nothing more goes out for this draft. */
  reset(): void {
    this.clearTimer();
    this.lastSent = '';
  }

  private fire(draft: string): void {
    this.timer = undefined;
    if (draft === this.lastSent) return;
    this.lastSent = draft;
    this.send(draft);
  }

  private clearTimer(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

function words(s: string): number {
  return s.split(/\s+/).filter(Boolean).length;
}
