import { describe, expect, it } from 'vitest';
import { readSSE, SSEParser, type SSEEvent } from '../src/transport/sse';

function parseChunks(chunks: string[]): SSEEvent[] {
  const out: SSEEvent[] = [];
  const p = new SSEParser((e) => out.push(e));
  for (const c of chunks) p.feed(c);
  p.end();
  return out;
}

function parseBytes(bytes: Uint8Array, cuts: number[]): SSEEvent[] {
  const out: SSEEvent[] = [];
  const p = new SSEParser((e) => out.push(e));
  let prev = 0;
  for (const c of [...cuts, bytes.length]) {
    p.feedBytes(bytes.subarray(prev, c));
    prev = c;
  }
  p.end();
  return out;
}

const STREAM =
  'event: trace\ndata: {"request_id":"r1","chat_id":3}\n\n' +
  ': keep-alive comment\n\n' +
  'event: token\r\ndata: {"text":"h\\u00e9llo — ünïcode ✓ 🦊"}\r\n\r\n' +
  'event: sources\rdata: [1,\rdata: 2]\r\r' +
  'data:no-space\n\n' +
  'event: done\ndata: {"ok":true}\n\n';

const EXPECTED: Array<Pick<SSEEvent, 'event' | 'data'>> = [
  { event: 'trace', data: '{"request_id":"r1","chat_id":3}' },
  { event: 'token', data: '{"text":"h\\u00e9llo — ünïcode ✓ 🦊"}' },
  { event: 'sources', data: '[1,\n2]' },
  { event: 'message', data: 'no-space' },
  { event: 'done', data: '{"ok":true}' },
];

const strip = (evs: SSEEvent[]) => evs.map(({ event, data }) => ({ event, data }));

describe('SSEParser', () => {
  it('parses a whole stream with LF, CRLF and CR line endings', () => {
    expect(strip(parseChunks([STREAM]))).toEqual(EXPECTED);
  });

  it('gives the same events whatever single split point the text is cut at', () => {
    for (let i = 0; i <= STREAM.length; i++) {
      expect(strip(parseChunks([STREAM.slice(0, i), STREAM.slice(i)])), `cut at ${i}`).toEqual(EXPECTED);
    }
  });

  it('gives the same events when fed one character at a time', () => {
    expect(strip(parseChunks([...STREAM]))).toEqual(EXPECTED);
  });

  it('gives the same events whatever two byte split points (multi-byte UTF-8 split too)', () => {
    const bytes = new TextEncoder().encode(STREAM);
    for (let i = 0; i <= bytes.length; i += 3) {
      for (let j = i; j <= bytes.length; j += 7) {
        expect(strip(parseBytes(bytes, [i, j])), `cuts ${i},${j}`).toEqual(EXPECTED);
      }
    }
    // every single byte boundary, including inside 🦊 (4 bytes) and é
    for (let i = 0; i <= bytes.length; i++) {
      expect(strip(parseBytes(bytes, [i]))).toEqual(EXPECTED);
    }
  });

  it('does not invent a blank line when CRLF is split between chunks', () => {
    // If the LF after a split CR were treated as its own line ending, the first event would be dispatched
    // before its second data line.
    const evs = parseChunks(['data: a\r', '\ndata: b\r', '\n\r', '\n']);
    expect(strip(evs)).toEqual([{ event: 'message', data: 'a\nb' }]);
  });

  it('joins multi-line data with LF and keeps empty data lines', () => {
    const evs = parseChunks(['data: line one\ndata:\ndata:  two spaces\n\n']);
    expect(evs[0].data).toBe('line one\n\n two spaces');
  });

  it('dispatches an event whose only data line is empty, but not one without data', () => {
    const evs = parseChunks(['event: x\n\n', 'data\n\n', 'event: y\ndata:\n\n']);
    expect(strip(evs)).toEqual([
      { event: 'message', data: '' },
      { event: 'y', data: '' },
    ]);
  });

  it('resets the event type after each dispatch', () => {
    const evs = parseChunks(['event: stage\ndata: 1\n\ndata: 2\n\n']);
    expect(evs.map((e) => e.event)).toEqual(['stage', 'message']);
  });

  it('discards an unterminated event at the end of the stream', () => {
    const evs = parseChunks(['data: complete\n\n', 'event: token\ndata: {"text":"half"}\n']);
    expect(strip(evs)).toEqual([{ event: 'message', data: 'complete' }]);
  });

  it('strips a leading BOM, handles id (not with NUL) and numeric retry, ignores unknown fields', () => {
    const out: SSEEvent[] = [];
    const p = new SSEParser((e) => out.push(e));
    p.feed('\uFEFFid: 7\nretry: 1500\nfoo: bar\ndata: x\n\nid: bad\u0000\nretry: 1x\ndata: y\n\n');
    p.end();
    expect(out).toEqual([
      { event: 'message', data: 'x', id: '7' },
      { event: 'message', data: 'y', id: '7' },
    ]);
    expect(p.retry).toBe(1500);
  });

  it('keeps colons inside the value and only strips one space', () => {
    const evs = parseChunks(['data:  {"a": "b:c"}\n\n']);
    expect(evs[0].data).toBe(' {"a": "b:c"}');
  });
});

describe('readSSE', () => {
  it('reads a ReadableStream of byte chunks to its end', async () => {
    const bytes = new TextEncoder().encode(STREAM);
    const stream = new ReadableStream<Uint8Array>({
      start(ctl) {
        for (let i = 0; i < bytes.length; i += 5) ctl.enqueue(bytes.slice(i, i + 5));
        ctl.close();
      },
    });
    const out: SSEEvent[] = [];
    await readSSE(stream, (e) => out.push(e));
    expect(strip(out)).toEqual(EXPECTED);
  });

  it('rejects when the stream errors', async () => {
    const stream = new ReadableStream<Uint8Array>({
      start(ctl) {
        ctl.enqueue(new TextEncoder().encode('data: a\n\n'));
        ctl.error(new Error('boom'));
      },
    });
    await expect(readSSE(stream, () => undefined)).rejects.toThrow('boom');
  });
});
