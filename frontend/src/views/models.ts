// Models found on the machine, and the choice of chat / embedding / rerank model.
// contract: settings.chat_model etc. are taken to hold a model's `path` (unique); see the report.

import { clear, errMsg, h } from '../dom';
import { fmtBytes, fmtInt, fmtParams } from '../format';
import type { ModelInfo, Settings, SystemInfo } from '../transport/types';
import type { Ctx } from './ctx';

type Slot = { key: 'chat_model' | 'fast_chat_model' | 'draft_model' | 'embed_model' | 'rerank_model'; kind: string; label: string; optional: boolean };
const SLOTS: Slot[] = [
  { key: 'chat_model', kind: 'chat', label: 'Chat model', optional: false },
  { key: 'fast_chat_model', kind: 'chat', label: 'Fast chat model (routing, optional)', optional: true },
  { key: 'draft_model', kind: 'chat', label: 'Draft model (speculative decoding, same vocabulary, optional)', optional: true },
  { key: 'embed_model', kind: 'embedding', label: 'Embedding model', optional: false },
  { key: 'rerank_model', kind: 'rerank', label: 'Rerank model', optional: true },
];

/** Options for one slot: models of that kind first; the current value is kept even if not found. */
export function slotOptions(models: ModelInfo[], kind: string, current: string, optional: boolean): Array<{ value: string; label: string }> {
  const out: Array<{ value: string; label: string }> = [];
  if (optional) out.push({ value: '', label: 'none' });
  for (const m of models.filter((x) => x.kind === kind)) {
    out.push({ value: m.path, label: `${m.name}${m.quantization ? ` (${m.quantization})` : ''}${m.fits_in_ram === false ? ' — does not fit in RAM' : ''}` });
  }
  if (current && !out.some((o) => o.value === current)) out.push({ value: current, label: `${current} (not found)` });
  return out;
}

/** The runner build in use, the builds this CPU could use, and where each loaded model's weights went. */
export function systemNodes(s: SystemInfo): HTMLElement[] {
  const c = s.cpu;
  const out: HTMLElement[] = [
    c.error
      ? h('p', { class: 'bad', testid: 'runner-variant', text: `No model runner: ${c.error}` })
      : h('p', { testid: 'runner-variant', text: `Models run on the ${c.variant} build of llama.cpp` + (c.variant === c.best ? ', the best for this CPU.' : ` (best for this CPU: ${c.best}).`) }),
    h('table', { class: 'models', testid: 'variant-list' },
      h('thead', {}, h('tr', {}, ...['Build', 'This CPU', 'Installed', 'About'].map((t) => h('th', { text: t })))),
      h('tbody', {}, ...c.variants.map((v) =>
        h('tr', { attrs: { 'data-variant': v.name } },
          h('td', {}, h('strong', { text: v.name })),
          h('td', { class: v.supported ? 'ok' : 'muted', text: v.supported ? 'yes' : 'no' }),
          h('td', { text: v.installed ? 'yes' : 'no' }),
          h('td', { text: (v.opt_in ? `Opt-in (LORE_CPU_VARIANT=${v.name}). ` : '') + v.about }),
        ))),
    ),
  ];
  for (const m of s.loaded) {
    const bufs = m.runner.weight_buffers?.join(', ');
    out.push(h('p', { class: 'muted', testid: 'loaded-model', attrs: { 'data-role': m.role } },
      `${m.role}: ${m.path.split(/[\\/]/).pop()} on ${m.cpu_variant}` + (bufs ? `, weights in ${bufs}` : ', not started yet')));
  }
  out.push(h('p', { class: 'muted small', title: c.features, text: `CPU features: ${c.features || 'none detected'}` }));
  return out;
}

export class ModelsView {
  readonly el: HTMLElement;
  private readonly tbody: HTMLTableSectionElement;
  private readonly selects = new Map<Slot['key'], HTMLSelectElement>();
  private readonly status: HTMLElement;
  private readonly machine: HTMLElement;
  private settings: Settings | undefined;

  constructor(private readonly ctx: Ctx) {
    this.tbody = h('tbody');
    this.status = h('span', { class: 'muted', testid: 'models-status' });
    this.machine = h('div', { testid: 'system-info' });
    const form = h('form', { class: 'model-choice' });
    for (const s of SLOTS) {
      const sel = h('select', { testid: `select-${s.key.replace('_model', '')}-model`, attrs: { 'aria-label': s.label } });
      this.selects.set(s.key, sel);
      form.append(h('label', { class: 'field' }, h('span', { text: s.label }), sel));
    }
    form.append(h('div', { class: 'row' }, h('button', { type: 'submit', class: 'btn primary', testid: 'save-models', text: 'Use these models' }), this.status));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      void this.save();
    });
    this.el = h('div', { class: 'view models-view', testid: 'models-view' },
      h('section', { class: 'card' }, h('h2', { text: 'Models in use' }), form),
      h('section', { class: 'card' }, h('h2', { text: 'This machine' }), this.machine),
      h('section', { class: 'card' },
        h('div', { class: 'card-head' }, h('h2', { text: 'Models on this machine' }),
          h('button', { type: 'button', class: 'btn small', text: 'Refresh', on: { click: () => void this.load() } })),
        h('table', { class: 'models', testid: 'model-list' },
          h('thead', {}, h('tr', {}, ...['Name', 'Kind', 'Architecture', 'Params', 'Quantisation', 'Size', 'Context', 'RAM', 'Fits', 'Source'].map((t) => h('th', { text: t })))),
          this.tbody),
      ),
    );
  }

  async load(): Promise<void> {
    const [models, settings, system] = await Promise.allSettled([this.ctx.t.models(), this.ctx.t.settings(), this.ctx.t.system()]);
    clear(this.machine);
    if (system.status === 'fulfilled') this.machine.append(...systemNodes(system.value));
    else this.machine.append(h('p', { class: 'muted', text: `Unavailable: ${errMsg(system.reason)}` }));
    clear(this.tbody);
    const list = models.status === 'fulfilled' ? (models.value ?? []) : [];
    if (models.status === 'rejected') this.ctx.notify(`Cannot list models: ${errMsg(models.reason)}`);
    for (const m of list) {
      this.tbody.append(
        h('tr', { testid: 'model-row', attrs: { 'data-path': m.path, 'data-kind': m.kind } },
          h('td', { title: m.path }, h('strong', { text: m.name })),
          h('td', { text: m.kind }),
          h('td', { text: m.architecture ?? '—' }),
          h('td', { text: fmtParams(m.params) }),
          h('td', { text: m.quantization ?? '—' }),
          h('td', { text: fmtBytes(m.size) }),
          h('td', { text: fmtInt(m.context_length) }),
          h('td', { text: fmtBytes(m.ram_estimate) }),
          h('td', { class: m.fits_in_ram ? 'ok' : 'bad', testid: 'model-fits', text: m.fits_in_ram ? 'yes' : m.fits_in_ram === false ? 'no' : '—' }),
          h('td', { text: m.source ?? '—' }),
        ),
      );
    }
    if (!list.length) this.tbody.append(h('tr', {}, h('td', { attrs: { colspan: 10 }, class: 'muted', text: 'No models found.' })));
    if (settings.status === 'fulfilled' && settings.value) {
      this.settings = settings.value;
      for (const s of SLOTS) {
        const sel = this.selects.get(s.key)!;
        const cur = String(this.settings[s.key] ?? '');
        sel.replaceChildren(...slotOptions(list, s.kind, cur, s.optional).map((o) => h('option', { value: o.value, text: o.label })));
        sel.value = cur;
      }
    } else if (settings.status === 'rejected') {
      this.ctx.notify(`Cannot load settings: ${errMsg(settings.reason)}`);
    }
  }

  private async save(): Promise<void> {
    if (!this.settings) return;
    const next: Settings = { ...this.settings };
    for (const s of SLOTS) next[s.key] = this.selects.get(s.key)!.value;
    try {
      await this.ctx.t.saveSettings(next);
      this.settings = next;
      this.status.textContent = 'Saved.';
    } catch (e) {
      this.status.textContent = '';
      this.ctx.notify(`Cannot save: ${errMsg(e)}`);
    }
  }
}
