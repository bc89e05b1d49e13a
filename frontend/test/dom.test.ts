// Backticked commands as <code>, never as literal backticks (issue 35, 19); paths that wrap at separators (21).
import { describe, expect, it, vi } from 'vitest';
import { breakablePath, codeText, h } from '../src/dom';
import type { Ctx } from '../src/views/ctx';
import { SettingsView } from '../src/views/settings';
import { renderSweep } from '../src/views/sweep';
import type { Transport } from '../src/transport/types';

const html = (nodes: Node[]) => h('p', {}, ...nodes).innerHTML;

describe('codeText', () => {
  it('renders `spans` as code, as text only', () => {
    expect(html(codeText('run `lore serve` now'))).toBe('run <code>lore serve</code> now');
    expect(html(codeText('`a` and `b`'))).toBe('<code>a</code> and <code>b</code>');
    expect(html(codeText('no code'))).toBe('no code');
    expect(html(codeText('odd ` one'))).toBe('odd ` one');
    expect(html(codeText('`a` then ` odd'))).toBe('<code>a</code> then ` odd');
    expect(html(codeText('x `<img src=x onerror=alert(1)>` y'))).toBe('x <code>&lt;img src=x onerror=alert(1)&gt;</code> y');
  });

  it('breakablePath wraps after / \\ - _ only', () => {
    expect(html(breakablePath('a/b-c_d.md'))).toBe('a/<wbr>b-<wbr>c_<wbr>d.md');
    expect(html(breakablePath('C:\\x\\y.txt'))).toBe('C:\\<wbr>x\\<wbr>y.txt');
    expect(html(breakablePath('plain.md'))).toBe('plain.md');
  });
});

describe('Settings shows no literal backticks', () => {
  it('in the help texts and the efSearch note', () => {
    const t = { kind: 'http', desktop: false } as unknown as Transport;
    const v = new SettingsView({ t, notify: vi.fn() } as unknown as Ctx);
    expect(v.el.textContent).not.toContain('`');
    expect(v.el.querySelector('#setting-passage_kv-help code')?.textContent).toBe('lore bench ttft --fidelity');
    const none = renderSweep(undefined, 0);
    expect(none.textContent).not.toContain('`');
    expect(Array.from(none.querySelectorAll('code')).map((c) => c.textContent)).toEqual(['lore bench retrieval --sweep', '--sweep-sizes 100000']);
  });
});
