// Retrieval and runtime settings.

import { errMsg, h } from '../dom';
import type { Settings } from '../transport/types';
import type { Ctx } from './ctx';

type NumKey = 'top_k' | 'rerank_k' | 'ef_search' | 'context_tokens' | 'threads' | 'gpu_layers';

export const NUMERIC_SETTINGS: Array<{ key: NumKey; label: string; help: string; min: number; max: number }> = [
  { key: 'top_k', label: 'Top K', help: 'passages retrieved per question', min: 1, max: 200 },
  { key: 'rerank_k', label: 'Rerank K', help: 'candidates the reranker scores (0 = no rerank)', min: 0, max: 200 },
  { key: 'ef_search', label: 'ef_search', help: 'HNSW search breadth', min: 1, max: 4096 },
  { key: 'context_tokens', label: 'Context tokens', help: 'prompt budget for passages', min: 256, max: 1048576 },
  { key: 'threads', label: 'Threads', help: 'CPU threads for the model (0 = auto)', min: 0, max: 512 },
  { key: 'gpu_layers', label: 'GPU layers', help: 'layers offloaded to the GPU (0 = CPU only)', min: 0, max: 1000 },
];

/** Reads the form values; returns the settings or a list of problems. */
export function readNumeric(values: Record<NumKey, string>, base: Settings): { settings?: Settings; errors: string[] } {
  const errors: string[] = [];
  const out: Settings = { ...base };
  for (const f of NUMERIC_SETTINGS) {
    const raw = (values[f.key] ?? '').trim();
    if (!/^-?\d+$/.test(raw)) {
      errors.push(`${f.label} must be a whole number`);
      continue;
    }
    const n = parseInt(raw, 10);
    if (n < f.min || n > f.max) {
      errors.push(`${f.label} must be between ${f.min} and ${f.max}`);
      continue;
    }
    out[f.key] = n;
  }
  return errors.length ? { errors } : { settings: out, errors };
}

export class SettingsView {
  readonly el: HTMLElement;
  private readonly inputs = new Map<NumKey, HTMLInputElement>();
  private readonly status: HTMLElement;
  private base: Settings | undefined;

  constructor(private readonly ctx: Ctx) {
    const form = h('form', { class: 'settings-form', testid: 'settings-form' });
    for (const f of NUMERIC_SETTINGS) {
      const inp = h('input', { type: 'number', testid: `setting-${f.key}`, attrs: { min: f.min, max: f.max, step: 1, 'aria-label': f.label } });
      this.inputs.set(f.key, inp);
      form.append(h('label', { class: 'field' }, h('span', { text: f.label }), inp, h('small', { class: 'muted', text: f.help })));
    }
    this.status = h('span', { class: 'muted', testid: 'settings-status' });
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
      for (const f of NUMERIC_SETTINGS) this.inputs.get(f.key)!.value = String(this.base?.[f.key] ?? '');
      this.status.textContent = '';
    } catch (e) {
      this.ctx.notify(`Cannot load settings: ${errMsg(e)}`);
    }
  }

  private async save(): Promise<void> {
    if (!this.base) return;
    const vals = {} as Record<NumKey, string>;
    for (const f of NUMERIC_SETTINGS) vals[f.key] = this.inputs.get(f.key)!.value;
    const r = readNumeric(vals, this.base);
    if (!r.settings) {
      this.status.textContent = r.errors.join('; ');
      this.status.classList.add('error');
      return;
    }
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
