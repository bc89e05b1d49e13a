// Markdown for untrusted model output (it can echo hostile document text).
// Layer 1, marked: raw HTML is rendered as escaped text; images other than inline raster data: URIs become a
// text placeholder (this covers reference-style images, which the lexer resolves into image tokens); links
// become inert text (http(s) links show their URL; other schemes show only their text). No <a> is emitted.
// Layer 2, DOMPurify with an allow-list of plain formatting tags, no `a`, no `style`/`id`/event attributes,
// and a hook that again drops any non-data: image.
// Layer 3, citations: `[n]` in text nodes (outside code) become in-app anchors, built with the DOM API after
// sanitising, so nothing from the model ever lands in an href.

import DOMPurify from 'dompurify';
import { Marked, type Tokens } from 'marked';

const SAFE_DATA_IMAGE = /^data:image\/(?:png|jpe?g|gif|webp);base64,[a-z0-9+/=\s]+$/i;
const HTTP_URL = /^https?:\/\/[^\s<>"']+$/i;

export function escapeHTML(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function imagePlaceholder(alt: string): string {
  const label = alt.trim() ? `image removed: ${alt.trim()}` : 'image removed';
  return `<span class="md-img-blocked">[${escapeHTML(label)}]</span>`;
}

const marked = new Marked({ gfm: true, breaks: false, async: false });
marked.use({
  renderer: {
    html({ text }: Tokens.HTML | Tokens.Tag): string {
      return escapeHTML(text);
    },
    image({ href, text }: Tokens.Image): string {
      if (typeof href === 'string' && SAFE_DATA_IMAGE.test(href)) {
        return `<img src="${escapeHTML(href)}" alt="${escapeHTML(text ?? '')}">`;
      }
      return imagePlaceholder(text ?? '');
    },
    link(this: { parser: { parseInline(t: Tokens.Generic[]): string } }, { href, tokens, text }: Tokens.Link): string {
      const inner = tokens ? this.parser.parseInline(tokens) : escapeHTML(text ?? '');
      const url = typeof href === 'string' ? href.trim() : '';
      if (!HTTP_URL.test(url)) return `<span class="md-link">${inner}</span>`;
      const plain = (text ?? '').trim();
      if (plain === url || plain === url.replace(/^https?:\/\//i, '')) {
        return `<span class="md-ext-url">${escapeHTML(url)}</span>`;
      }
      return `<span class="md-link">${inner}</span> <span class="md-ext-url">(${escapeHTML(url)})</span>`;
    },
  },
});

const ALLOWED_TAGS = [
  'p', 'br', 'hr', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'blockquote', 'pre', 'code', 'em', 'strong', 'del', 's',
  'ul', 'ol', 'li', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'span', 'img', 'input', 'sup', 'sub',
];
const ALLOWED_ATTR = ['class', 'alt', 'src', 'align', 'start', 'type', 'checked', 'disabled'];
const CLASS_OK = /^(?:md-[a-z-]+|language-[\w-]{1,40})$/;

let purifier: ReturnType<typeof DOMPurify> | undefined;

function getPurifier(): ReturnType<typeof DOMPurify> {
  if (purifier) return purifier;
  const p = DOMPurify(window);
  p.addHook('afterSanitizeAttributes', (node: Element) => {
    const tag = node.nodeName.toLowerCase();
    if (tag === 'img') {
      const src = node.getAttribute('src') ?? '';
      if (!SAFE_DATA_IMAGE.test(src)) {
        const span = node.ownerDocument.createElement('span');
        span.className = 'md-img-blocked';
        const alt = node.getAttribute('alt') ?? '';
        span.textContent = alt ? `[image removed: ${alt}]` : '[image removed]';
        node.replaceWith(span);
        return;
      }
    }
    if (tag === 'input') {
      // GFM task-list checkboxes only.
      if (node.getAttribute('type') !== 'checkbox') {
        node.remove();
        return;
      }
      node.setAttribute('disabled', '');
    }
    if (node.hasAttribute('class')) {
      const keep = (node.getAttribute('class') ?? '').split(/\s+/).filter((c) => CLASS_OK.test(c));
      if (keep.length) node.setAttribute('class', keep.join(' '));
      else node.removeAttribute('class');
    }
  });
  purifier = p;
  return p;
}

export interface RenderOptions {
  /** Source numbers that exist; `[n]` for these becomes a citation anchor. Others stay text. */
  citations?: ReadonlySet<number>;
}

/** Markdown → sanitised DocumentFragment (ready to append). */
export function renderMarkdown(src: string, opts: RenderOptions = {}): DocumentFragment {
  const html = marked.parse(src ?? '', { async: false }) as string;
  const frag = sanitizeHTML(html);
  if (opts.citations && opts.citations.size) linkCitations(frag, opts.citations);
  return frag;
}

/** Layer 2 on its own: HTML → DocumentFragment with only plain formatting left. */
export function sanitizeHTML(html: string): DocumentFragment {
  return getPurifier().sanitize(html, {
    ALLOWED_TAGS,
    ALLOWED_ATTR,
    ALLOW_DATA_ATTR: false,
    ALLOW_ARIA_ATTR: false,
    RETURN_DOM_FRAGMENT: true,
    // Only data: images are kept (enforced again in the hook); everything else with a URL is dropped.
    ALLOWED_URI_REGEXP: /^data:image\//i,
  }) as DocumentFragment;
}

/** Same as renderMarkdown, serialised (for tests and copy-as-HTML). */
export function renderMarkdownToHTML(src: string, opts: RenderOptions = {}): string {
  const div = document.createElement('div');
  div.append(renderMarkdown(src, opts));
  return div.innerHTML;
}

const CITE = /\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]/g;

/** Replaces `[n]` / `[n, m]` in text nodes (not inside code/pre) with citation anchors for known n. */
export function linkCitations(root: DocumentFragment | Element, known: ReadonlySet<number>): number {
  const doc = root.ownerDocument ?? document;
  const walker = doc.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const texts: Text[] = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const t = n as Text;
    if (t.parentElement?.closest('code, pre, .cite')) continue;
    if (t.data.includes('[')) texts.push(t);
  }
  let made = 0;
  for (const t of texts) {
    const s = t.data;
    CITE.lastIndex = 0;
    let m: RegExpExecArray | null;
    let last = 0;
    const parts: Node[] = [];
    while ((m = CITE.exec(s))) {
      const nums = m[1].split(',').map((x) => parseInt(x.trim(), 10));
      if (!nums.every((x) => known.has(x))) continue;
      if (m.index > last) parts.push(doc.createTextNode(s.slice(last, m.index)));
      nums.forEach((num, i) => {
        if (i > 0) parts.push(doc.createTextNode(' '));
        const a = doc.createElement('a');
        a.className = 'cite';
        a.setAttribute('href', `#source-${num}`);
        a.setAttribute('data-cite', String(num));
        a.setAttribute('data-testid', 'citation');
        a.textContent = `[${num}]`;
        parts.push(a);
        made++;
      });
      last = m.index + m[0].length;
    }
    if (!parts.length) continue;
    if (last < s.length) parts.push(doc.createTextNode(s.slice(last)));
    t.replaceWith(...parts);
  }
  return made;
}
