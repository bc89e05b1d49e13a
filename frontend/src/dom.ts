// Tiny DOM builder. Text is always set as text (never innerHTML); no inline styles (CSP style-src 'self').

type Child = Node | string | number | null | undefined | false;
type Handler = (ev: Event) => void;

export interface Attrs {
  class?: string;
  testid?: string;
  text?: string;
  title?: string;
  type?: string;
  value?: string;
  placeholder?: string;
  disabled?: boolean;
  hidden?: boolean;
  for?: string;
  id?: string;
  name?: string;
  href?: string;
  role?: string;
  attrs?: Record<string, string | number | boolean | undefined>;
  on?: Partial<Record<string, Handler>>;
}

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, a: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (a.class) el.className = a.class;
  if (a.testid) el.setAttribute('data-testid', a.testid);
  if (a.title) el.title = a.title;
  if (a.id) el.id = a.id;
  if (a.role) el.setAttribute('role', a.role);
  if (a.hidden) el.hidden = true;
  if (a.type !== undefined) el.setAttribute('type', a.type);
  if (a.name !== undefined) el.setAttribute('name', a.name);
  if (a.href !== undefined) el.setAttribute('href', a.href);
  if (a.for !== undefined) el.setAttribute('for', a.for);
  if (a.placeholder !== undefined) el.setAttribute('placeholder', a.placeholder);
  if (a.value !== undefined) (el as unknown as HTMLInputElement).value = a.value;
  if (a.disabled) (el as unknown as HTMLButtonElement).disabled = true;
  if (a.attrs) {
    for (const [k, v] of Object.entries(a.attrs)) {
      if (/^on/i.test(k) || k.toLowerCase() === 'style') throw new Error(`refusing attribute ${k}`);
      if (v === undefined || v === false) continue;
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  if (a.on) for (const [ev, fn] of Object.entries(a.on)) if (fn) el.addEventListener(ev, fn);
  if (a.text !== undefined) el.textContent = a.text;
  append(el, ...children);
  return el;
}

export function append(el: Node, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
}

export function clear(el: Element): void {
  el.replaceChildren();
}

const SVG_NS = 'http://www.w3.org/2000/svg';

export function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number | undefined> = {},
  ...children: Array<SVGElement | string | null | undefined>
): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined) continue;
    if (/^on/i.test(k) || k === 'style') throw new Error(`refusing attribute ${k}`);
    el.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return el;
}

/**
 * Text with `backticked` spans as <code> (commands in help text and the server's messages), every part set as
 * text. An unmatched backtick stays as it is.
 */
export function codeText(text: string): Node[] {
  const parts = text.split('`');
  if (parts.length < 3) return [document.createTextNode(text)];
  const out: Node[] = [];
  parts.forEach((p, i) => {
    if (i % 2 === 1 && i < parts.length - 1) out.push(h('code', { text: p }));
    else if (p || i % 2 === 1) out.push(document.createTextNode(i % 2 === 1 ? `\`${p}` : p));
  });
  return out;
}

/**
 * A path as text that wraps after its separators and dashes, never inside a word: "notes/2024-04/a_b.md"
 * with <wbr> after each "/", "\\", "-" and "_".
 */
export function breakablePath(path: string): Node[] {
  const out: Node[] = [];
  for (const piece of path.split(/(?<=[/\\_-])/)) {
    if (out.length) out.push(document.createElement('wbr'));
    out.push(document.createTextNode(piece));
  }
  return out;
}

/** Message of any thrown value. */
export function errMsg(e: unknown): string {
  if (e instanceof Error) return e.message;
  if (typeof e === 'string') return e;
  return String(e);
}

/** Copies text; falls back to a hidden textarea where the async clipboard is unavailable (webviews). */
export async function copyText(text: string): Promise<void> {
  try {
    if (navigator.clipboard?.writeText) {
      await navigator.clipboard.writeText(text);
      return;
    }
  } catch {
    /* fall through */
  }
  const ta = h('textarea', { class: 'offscreen', value: text });
  document.body.append(ta);
  ta.select();
  try {
    document.execCommand('copy');
  } finally {
    ta.remove();
  }
}

/** Downloads text as a file through a Blob URL. */
export function download(filename: string, text: string, type = 'application/json'): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = h('a', { href: url, attrs: { download: filename }, class: 'offscreen' });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
