// Waterfall layout maths: positions come only from the trace's `stages` (durations) and `stage_starts`
// (offsets from request received). The panel computes no timing itself, except the UI's own paint row,
// which comes from the UI's measurement (ui_ttft_ms / paint_ms).

import type { StageMap, Trace } from '../transport/types';

export interface RowDef {
  /** Stage name, also used in data-testid="waterfall-row-<stage>". */
  stage: string;
  key: string;
  label: string;
  /** Rows of one group run in parallel (drawn on separate rows, overlapping in time). */
  group?: string;
  /** Shown only when the trace has the stage. */
  optional?: boolean;
  /** A part of another row's stage (drawn indented under it). */
  parent?: string;
}

export const WATERFALL_ROWS: RowDef[] = [
  // Retrieval encloses the query embedding, then vector ‖ BM25 and their fusion.
  { stage: 'retrieval', key: 'retrieval_ms', label: 'retrieval', optional: true },
  { stage: 'embed', key: 'embed_ms', label: 'embed', parent: 'retrieval' },
  { stage: 'vector', key: 'vector_ms', label: 'vector', group: 'retrieval', parent: 'retrieval' },
  { stage: 'bm25', key: 'bm25_ms', label: 'bm25', group: 'retrieval', parent: 'retrieval' },
  // A skipped rerank is listed with the server's reason, without a bar.
  { stage: 'rerank', key: 'rerank_ms', label: 'rerank', optional: true },
  { stage: 'prompt_assemble', key: 'prompt_assemble_ms', label: 'prompt assembly' },
  // The wait for the model, which answers one question at a time (no model, as in an extractive answer: no
  // queue, prefill or first-token rows).
  { stage: 'queue', key: 'queue_ms', label: 'queue', optional: true },
  { stage: 'tokenize', key: 'tokenize_ms', label: 'tokenize', optional: true },
  // Placing an earlier question's kept state before reading (a question asked again, another chat's passages).
  { stage: 'restore', key: 'restore_ms', label: 'restore KV', optional: true },
  { stage: 'prefill', key: 'prefill_ms', label: 'prefill', optional: true },
  // Placing saved passage KV, inside prefill (only with the passage KV setting on).
  { stage: 'stitch', key: 'stitch_ms', label: 'stitch KV', parent: 'prefill', optional: true },
  { stage: 'first_decode', key: 'first_decode_ms', label: 'first token', optional: true },
  { stage: 'flush', key: 'flush_ms', label: 'flush', optional: true },
  { stage: 'paint', key: 'paint_ms', label: 'paint (UI)', optional: true },
  // The rest of the answer, from the first token to the last (the trace's decode_ms).
  { stage: 'decode', key: 'decode_ms', label: 'decode', optional: true },
];

export interface WaterfallRow extends RowDef {
  /** Start offset in ms, null when the trace gives none (the row is listed without a bar). */
  startMs: number | null;
  durMs: number | null;
  /** Bar position as fractions of the axis, 0..1; null when there is no bar. */
  x: number | null;
  w: number | null;
  /** The bar overlaps another row of the same group in time. */
  parallel: boolean;
  /** Why the stage did not run (the trace's skipped_stages), else undefined. */
  skipped?: string;
}

export interface Marker {
  label: string;
  ms: number;
  x: number;
}

export interface WaterfallLayout {
  axisMs: number;
  rows: WaterfallRow[];
  ticks: Array<{ ms: number; x: number }>;
  markers: Marker[];
}

const num = (m: StageMap | undefined, k: string): number | null => {
  const v = m?.[k];
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null;
};

/** A "nice" tick step (1, 2, 2.5 or 5 × 10^k) giving about `count` ticks up to max. */
export function niceStep(max: number, count = 5): number {
  if (!(max > 0)) return 1;
  const raw = max / count;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const f of [1, 2, 2.5, 5, 10]) if (f * mag >= raw) return f * mag;
  return 10 * mag;
}

export function layoutWaterfall(trace: Trace, opts: { minWidth?: number } = {}): WaterfallLayout {
  const minW = opts.minWidth ?? 0.004;
  const stages = trace.stages ?? {};
  const starts = trace.stage_starts ?? {};

  const raw = WATERFALL_ROWS.flatMap((def) => {
    let dur = num(stages, def.key);
    let start = num(starts, def.key);
    if (def.stage === 'paint' && start === null) {
      // The UI's own row: it ended at ui_ttft_ms (from submit) and lasted paint_ms.
      const ui = num(stages, 'ui_ttft_ms');
      if (ui !== null && dur !== null) start = Math.max(0, ui - dur);
    }
    if (def.optional && dur === null && start === null) return [];
    if (dur === null && start !== null) dur = 0;
    return [{ def, start, dur }];
  });

  let axis = 0;
  for (const r of raw) if (r.start !== null && r.dur !== null) axis = Math.max(axis, r.start + r.dur);
  for (const k of ['ttft_ms', 'ui_ttft_ms']) axis = Math.max(axis, num(stages, k) ?? 0);
  if (!(axis > 0)) axis = 1;

  const rows: WaterfallRow[] = raw.map(({ def, start, dur }) => {
    const skipped = trace.skipped_stages?.[def.key];
    if (skipped !== undefined) return { ...def, startMs: null, durMs: 0, x: null, w: null, parallel: false, skipped };
    if (start === null || dur === null) return { ...def, startMs: start, durMs: dur, x: null, w: null, parallel: false };
    let x = start / axis;
    let w = Math.max(dur / axis, minW);
    if (x + w > 1) {
      // keep tiny bars at the very end visible inside the axis
      x = Math.max(0, 1 - w);
      w = Math.min(w, 1);
    }
    return { ...def, startMs: start, durMs: dur, x, w, parallel: false };
  });

  for (const r of rows) {
    if (!r.group || r.startMs === null || r.durMs === null) continue;
    r.parallel = rows.some(
      (o) =>
        o !== r &&
        o.group === r.group &&
        o.startMs !== null &&
        o.durMs !== null &&
        o.startMs < r.startMs! + Math.max(r.durMs!, 1e-9) &&
        r.startMs! < o.startMs + Math.max(o.durMs, 1e-9),
    );
  }

  const step = niceStep(axis);
  const ticks: Array<{ ms: number; x: number }> = [];
  for (let t = 0; t <= axis + step * 1e-9; t += step) ticks.push({ ms: round(t), x: t / axis });

  const markers: Marker[] = [];
  const ttft = num(stages, 'ttft_ms');
  if (ttft !== null) markers.push({ label: 'TTFT (server)', ms: ttft, x: ttft / axis });
  const ui = num(stages, 'ui_ttft_ms');
  if (ui !== null) markers.push({ label: 'TTFT (UI)', ms: ui, x: ui / axis });

  return { axisMs: axis, rows, ticks, markers };
}

function round(x: number): number {
  return Math.round(x * 1e6) / 1e6;
}

/** Merges the UI's own measurement into a trace (the server may not have it yet when `done` arrives). */
export function withUIMeasurement(trace: Trace, uiTTFTms?: number, paintMs?: number): Trace {
  if (uiTTFTms === undefined && paintMs === undefined) return trace;
  const stages = { ...trace.stages };
  if (uiTTFTms !== undefined && stages.ui_ttft_ms === undefined) stages.ui_ttft_ms = uiTTFTms;
  if (paintMs !== undefined && stages.paint_ms === undefined) stages.paint_ms = paintMs;
  return { ...trace, stages };
}
