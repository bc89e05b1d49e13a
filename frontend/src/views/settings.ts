// Retrieval and runtime settings. The ranges are the server's (app/settings.go, validate()), so what the
// server sends can always be saved back unchanged; several fields use 0 for "auto" or "off".

import { codeText, errMsg, h } from '../dom';
import type { HNSWSweep, Settings } from '../transport/types';
import type { Ctx } from './ctx';
import { renderSweep } from './sweep';

type NumKey = 'top_k' | 'rerank_k' | 'rerank_budget_ms' | 'ef_search' | 'context_tokens' | 'max_tokens' | 'threads' | 'gpu_layers' | 'passage_repair' | 'route_ttft_ms' | 'route_short_words' | 'speculate' | 'spec_floor_pct';

export interface NumField {
  key: NumKey;
  label: string;
  help: string;
  min: number;
  max: number;
  /** What 0 means, when it means something other than the number (shown next to the field). */
  zero?: string;
  unit?: string;
  group: string;
}

export const NUMERIC_SETTINGS: NumField[] = [
  { key: 'top_k', group: 'Retrieval', label: 'Top K', min: 1, max: 50, help: 'passages kept for the prompt, after fusion and rerank; as many as fit the context budget go in' },
  { key: 'rerank_k', group: 'Retrieval', label: 'Rerank K', min: 0, max: 100, zero: 'no rerank', help: 'candidates the rerank model scores (when one is chosen)' },
  { key: 'rerank_budget_ms', group: 'Retrieval', label: 'Rerank budget', unit: 'ms', min: 0, max: 60_000, zero: 'no budget', help: 'rerank is skipped when its measured cost for Rerank K candidates would exceed this' },
  { key: 'ef_search', group: 'Retrieval', label: 'ef_search', min: 0, max: 4096, zero: 'auto', help: 'HNSW search breadth: higher finds better neighbours, slower; 0 uses the index default' },
  { key: 'context_tokens', group: 'Prompt and answer', label: 'Context tokens', unit: 'tokens', min: 0, max: 32_768, zero: 'auto', help: 'prompt budget for passages; 0 sizes it from the measured prefill speed, about one second of reading' },
  { key: 'max_tokens', group: 'Prompt and answer', label: 'Max answer tokens', unit: 'tokens', min: 0, max: 32_768, zero: 'no limit', help: 'longest answer; 0 lets it run to the end of the context' },
  { key: 'route_ttft_ms', group: 'Routing (with a fast chat model, Models view)', label: 'First-token budget', unit: 'ms', min: 0, max: 600_000, zero: 'no budget', help: 'when the main model would take longer than this to read a question\'s new tokens (at its measured speed), the fast model answers' },
  { key: 'route_short_words', group: 'Routing (with a fast chat model, Models view)', label: 'Short question', unit: 'words', min: 0, max: 100, zero: 'off', help: 'a question of at most this many words that starts a chat goes to the fast model' },
  { key: 'speculate', group: 'Speculative decoding', label: 'Drafted tokens', unit: 'tokens a step', min: 0, max: 16, zero: 'off', help: 'the draft model (Models view), or else prompt lookup, proposes this many tokens that the chat model checks in one batch; speeds up the tokens after the first when most are kept' },
  { key: 'spec_floor_pct', group: 'Speculative decoding', label: 'Acceptance floor', unit: '%', min: 0, max: 100, zero: 'never off', help: 'below this share of drafted tokens kept, speculation switches itself off and is retried later' },
  { key: 'threads', group: 'Runtime', label: 'Threads', min: 0, max: 256, zero: 'auto', help: 'CPU threads for the model' },
  { key: 'gpu_layers', group: 'Runtime', label: 'GPU layers', min: 0, max: 1024, zero: 'CPU only', help: 'model layers offloaded to the GPU' },
  { key: 'passage_repair', group: 'Passage KV (approximate)', label: 'Repair tokens', unit: 'tokens', min: 0, max: 4096, help: 'tokens at the start of each stitched passage read again in place: more is closer to reading it in full, and slower' },
];

/** The passage KV switch: approximate, so off by default and said so where it is turned on. */
const PASSAGE_KV_HELP =
  'save each passage’s KV once and place it into later prompts instead of reading the passage again: answers start much sooner, but a placed passage has not read the sources before it, so answers can differ from a full reading. Refused for a model whose measured fidelity is below the floor (`lore bench ttft --fidelity`).';

/** "0 = auto" etc. for a field, '' when 0 has no special meaning. */
export function zeroNote(f: NumField): string {
  return f.zero ? `0 = ${f.zero}` : '';
}

/** Reads the form values; returns the settings or a list of problems (and the fields at fault). */
export function readNumeric(values: Partial<Record<NumKey, string>>, base: Settings): { settings?: Settings; errors: string[]; invalid: NumKey[] } {
  const errors: string[] = [];
  const invalid: NumKey[] = [];
  const out: Settings = { ...base };
  for (const f of NUMERIC_SETTINGS) {
    const raw = (values[f.key] ?? '').trim();
    if (!/^-?\d+$/.test(raw)) {
      errors.push(`${f.label} must be a whole number`);
      invalid.push(f.key);
      continue;
    }
    const n = parseInt(raw, 10);
    if (n < f.min || n > f.max) {
      errors.push(`${f.label} must be between ${f.min} and ${f.max}`);
      invalid.push(f.key);
      continue;
    }
    out[f.key] = n;
  }
  return errors.length ? { errors, invalid } : { settings: out, errors, invalid };
}

export class SettingsView {
  readonly el: HTMLElement;
  private readonly inputs = new Map<NumKey, HTMLInputElement>();
  private readonly passageKV: HTMLInputElement;
  private readonly status: HTMLElement;
  /** The measured efSearch trade-off, under the ef_search field. */
  private readonly sweep = h('div', { class: 'field-note', testid: 'sweep-box' });
  private sweepData: HNSWSweep | undefined;
  private base: Settings | undefined;

  constructor(private readonly ctx: Ctx) {
    // novalidate: the form's own messages (below) say what is wrong; the browser's bubble would block the
    // submit without a word in a webview.
    const form = h('form', { class: 'settings-form', testid: 'settings-form', attrs: { novalidate: true } });
    let group = '';
    this.passageKV = h('input', { type: 'checkbox', id: 'setting-passage_kv', testid: 'setting-passage_kv', attrs: { 'aria-describedby': 'setting-passage_kv-help' } });
    for (const f of NUMERIC_SETTINGS) {
      if (f.group !== group) {
        group = f.group;
        form.append(h('h3', { text: group }));
        if (f.key === 'passage_repair') {
          form.append(h('div', { class: 'field' },
            h('label', { for: 'setting-passage_kv', text: 'Stitch saved passages' }),
            h('span', { class: 'field-input' }, this.passageKV),
            h('small', { class: 'muted', id: 'setting-passage_kv-help' }, ...codeText(PASSAGE_KV_HELP))));
        }
      }
      const id = `setting-${f.key}`;
      const inp = h('input', { type: 'number', id, testid: id, attrs: { min: f.min, max: f.max, step: 1, inputmode: 'numeric', 'aria-describedby': `${id}-help` } });
      this.inputs.set(f.key, inp);
      form.append(
        h('div', { class: 'field' },
          h('label', { for: id, text: f.label }),
          h('span', { class: 'field-input' }, inp, f.unit ? h('span', { class: 'muted small', text: f.unit }) : null,
            f.zero ? h('span', { class: 'zero-note', testid: `${id}-zero`, text: zeroNote(f) }) : null),
          h('small', { class: 'muted', id: `${id}-help` }, ...codeText(`${f.help} (${f.min}–${f.max})`)),
        ),
      );
      if (f.key === 'ef_search') {
        form.append(this.sweep);
        inp.addEventListener('input', () => this.showSweep());
      }
    }
    this.status = h('span', { class: 'muted', testid: 'settings-status', role: 'status' });
    form.append(h('div', { class: 'row' }, h('button', { type: 'submit', class: 'btn primary', testid: 'save-settings', text: 'Save' }), this.status));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      void this.save();
    });
    this.el = h('div', { class: 'view settings-view', testid: 'settings-view' }, h('section', { class: 'card' }, h('h2', { text: 'Settings' }), form));
  }

  async load(): Promise<void> {
    try {
      this.base = await this.ctx.t.settings();
      for (const f of NUMERIC_SETTINGS) {
        const inp = this.inputs.get(f.key)!;
        inp.value = String(this.base?.[f.key] ?? 0);
        inp.removeAttribute('aria-invalid');
      }
      this.passageKV.checked = this.base?.passage_kv === true;
      this.sweepData = await this.ctx.t.hnswSweep().catch(() => undefined); // an older server has none
      this.showSweep();
      this.status.textContent = '';
      this.status.classList.remove('error');
    } catch (e) {
      this.ctx.notify(`Cannot load settings: ${errMsg(e)}`);
    }
  }

  private showSweep(): void {
    const ef = parseInt(this.inputs.get('ef_search')!.value, 10);
    this.sweep.replaceChildren(renderSweep(this.sweepData, Number.isNaN(ef) ? 0 : ef));
  }

  private async save(): Promise<void> {
    if (!this.base) return;
    const vals: Partial<Record<NumKey, string>> = {};
    for (const f of NUMERIC_SETTINGS) vals[f.key] = this.inputs.get(f.key)!.value;
    const r = readNumeric(vals, this.base);
    for (const f of NUMERIC_SETTINGS) {
      const inp = this.inputs.get(f.key)!;
      if (r.invalid.includes(f.key)) inp.setAttribute('aria-invalid', 'true');
      else inp.removeAttribute('aria-invalid');
    }
    if (!r.settings) {
      this.status.textContent = r.errors.join('; ');
      this.status.classList.add('error');
      return;
    }
    r.settings.passage_kv = this.passageKV.checked;
    try {
      await this.ctx.t.saveSettings(r.settings);
      this.base = r.settings;
      this.status.classList.remove('error');
      this.status.textContent = 'Saved.';
    } catch (e) {
      this.status.classList.add('error');
      this.status.textContent = `Cannot save: ${errMsg(e)}`;
    }
  }
}
