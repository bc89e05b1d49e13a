// Post-build check: dist/ must comply with the CSP in index.html and fetch nothing from the network.
// Fails the build when index.html has inline scripts/styles/handlers, when any asset points at a remote URL,
// or when the CSP meta tag is missing or weakened.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const dist = new URL('../dist/', import.meta.url).pathname;
const problems = [];
const files = [];
(function walk(d) {
  for (const n of readdirSync(d)) {
    const p = join(d, n);
    if (statSync(p).isDirectory()) walk(p);
    else files.push(p);
  }
})(dist);

// frame-ancestors is ignored in a <meta> CSP (and logged as a console error on every load): `lore serve`
// sends it, with the rest of this policy, as a header; a Wails window cannot be framed.
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "object-src 'none'; base-uri 'none'; form-action 'none'";

const html = readFileSync(join(dist, 'index.html'), 'utf8');
if (!html.includes(`content="${CSP}"`)) problems.push('index.html: CSP meta tag missing or changed');
if (/frame-ancestors/i.test(html)) problems.push('index.html: frame-ancestors in a <meta> CSP (header only)');
for (const m of html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/gi)) {
  if (!/\bsrc=/.test(m[1])) problems.push('index.html: inline <script>');
  if (m[2].trim()) problems.push('index.html: <script> with a body');
}
if (/<style\b/i.test(html)) problems.push('index.html: inline <style>');
if (/\sstyle\s*=/i.test(html)) problems.push('index.html: style attribute');
if (/\son[a-z]+\s*=/i.test(html)) problems.push('index.html: inline event handler');
for (const m of html.matchAll(/\b(?:src|href)\s*=\s*["']?([^"'\s>]+)/gi)) {
  if (/^(?:[a-z]+:)?\/\//i.test(m[1]) && !/^data:/i.test(m[1])) problems.push(`index.html: remote reference ${m[1]}`);
}

for (const f of files) {
  const rel = relative(dist, f);
  if (f.endsWith('.css')) {
    const css = readFileSync(f, 'utf8');
    if (/@import/i.test(css)) problems.push(`${rel}: @import`);
    for (const m of css.matchAll(/url\(\s*["']?([^"')]+)/gi)) {
      if (!/^data:/i.test(m[1]) && /^(?:[a-z]+:)?\/\//i.test(m[1])) problems.push(`${rel}: remote url(${m[1]})`);
    }
  }
  if (f.endsWith('.js')) {
    const js = readFileSync(f, 'utf8');
    // Remote fetches/imports would need an absolute URL literal next to them.
    for (const m of js.matchAll(/(?:fetch|import)\(\s*["'`](https?:)?\/\/[^"'`]+/g)) problems.push(`${rel}: remote load ${m[0]}`);
    if (/\beval\(|new Function\(/.test(js)) problems.push(`${rel}: eval/new Function (blocked by script-src 'self')`);
  }
}

const sizes = files.map((f) => [relative(dist, f), statSync(f).size]);
for (const [n, s] of sizes) console.log(`  ${n.padEnd(40)} ${(s / 1024).toFixed(1)} KiB`);
if (problems.length) {
  console.error('dist check FAILED:\n  ' + problems.join('\n  '));
  process.exit(1);
}
console.log('dist check: CSP-compliant, no remote references');
