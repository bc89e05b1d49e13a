// A small incremental parser for `text/event-stream`, following the WHATWG HTML "event stream
// interpretation" rules: lines end in CRLF, LF or CR (a CRLF may be split across chunks); blank line
// dispatches; `:` starts a comment; one space after the colon is dropped; several `data:` lines are joined
// with "\n"; an event with no data is not dispatched; an unterminated event at the end is discarded.

export interface SSEEvent {
  /** `event:` field, "message" when absent. */
  event: string;
  data: string;
  /** Last event ID seen so far (`id:` field). */
  id: string;
}

export class SSEParser {
  private buf = '';
  private data = '';
  private type = '';
  private lastId = '';
  private skipLF = false;
  private started = false;
  private decoder = new TextDecoder('utf-8');
  /** Milliseconds from the last valid `retry:` field, if any. */
  retry: number | undefined;

  constructor(private readonly onEvent: (ev: SSEEvent) => void) {}

  /** Feed raw bytes; multi-byte characters split across chunks are handled. */
  feedBytes(chunk: Uint8Array): void {
    this.feed(this.decoder.decode(chunk, { stream: true }));
  }

  /** Feed decoded text. */
  feed(text: string): void {
    if (!text) return;
    if (!this.started) {
      this.started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
      if (!text) return;
    }
    if (this.skipLF) {
      this.skipLF = false;
      if (text.charCodeAt(0) === 10) text = text.slice(1);
      if (!text) return;
    }
    const b = this.buf + text;
    let start = 0;
    for (let i = 0; i < b.length; i++) {
      const c = b.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      this.line(b.slice(start, i));
      if (c === 13) {
        if (i + 1 < b.length) {
          if (b.charCodeAt(i + 1) === 10) i++;
        } else {
          this.skipLF = true;
        }
      }
      start = i + 1;
    }
    this.buf = b.slice(start);
  }

  /** End of stream: flushes the decoder; a pending, unterminated event is discarded (per spec). */
  end(): void {
    const rest = this.decoder.decode();
    if (rest) this.feed(rest);
    this.buf = '';
    this.data = '';
    this.type = '';
  }

  private line(line: string): void {
    if (line === '') {
      this.dispatch();
      return;
    }
    if (line.charCodeAt(0) === 58 /* : */) return; // comment
    const colon = line.indexOf(':');
    let field: string;
    let value: string;
    if (colon === -1) {
      field = line;
      value = '';
    } else {
      field = line.slice(0, colon);
      value = line.slice(colon + 1);
      if (value.charCodeAt(0) === 32) value = value.slice(1);
    }
    switch (field) {
      case 'event':
        this.type = value;
        break;
      case 'data':
        this.data += value + '\n';
        break;
      case 'id':
        if (!value.includes('\u0000')) this.lastId = value;
        break;
      case 'retry':
        if (/^[0-9]+$/.test(value)) this.retry = parseInt(value, 10);
        break;
      default:
        break; // unknown fields are ignored
    }
  }

  private dispatch(): void {
    if (this.data === '') {
      this.type = '';
      return;
    }
    const ev: SSEEvent = { event: this.type || 'message', data: this.data.slice(0, -1), id: this.lastId };
    this.data = '';
    this.type = '';
    this.onEvent(ev);
  }
}

/**
 * Reads a `text/event-stream` body to its end, calling onEvent for each event. Resolves when the stream ends;
 * rejects if reading fails. An abort of `signal` cancels the reader (and so rejects) even if the body itself
 * does not notice the abort.
 */
export async function readSSE(
  body: ReadableStream<Uint8Array>,
  onEvent: (ev: SSEEvent) => void,
  signal?: AbortSignal,
): Promise<void> {
  const parser = new SSEParser(onEvent);
  const reader = body.getReader();
  const onAbort = () => void reader.cancel(signal?.reason).catch(() => undefined);
  if (signal?.aborted) onAbort();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (signal?.aborted) throw signal.reason ?? new DOMException('aborted', 'AbortError');
      if (done) break;
      if (value) parser.feedBytes(value);
    }
    parser.end();
  } finally {
    signal?.removeEventListener('abort', onAbort);
    reader.releaseLock();
  }
}
