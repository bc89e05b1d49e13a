// Number/time formatting without Intl: under LANG=C a webview reports navigator.language "C" and
// Intl.NumberFormat throws (see shared notes), so nothing here touches Intl or toLocaleString.

const DASH = '—';

function finite(x: unknown): x is number {
  return typeof x === 'number' && Number.isFinite(x);
}

/** 1234567 → "1,234,567"; non-numbers → "—". */
export function fmtInt(n: unknown): string {
  if (!finite(n)) return DASH;
  const neg = n < 0;
  const s = String(Math.round(Math.abs(n)));
  let out = '';
  for (let i = 0; i < s.length; i++) {
    if (i > 0 && (s.length - i) % 3 === 0) out += ',';
    out += s[i];
  }
  return (neg ? '-' : '') + out;
}

/** Fixed decimals with a trailing-zero trim: fmtNum(1.50, 2) → "1.5". */
export function fmtNum(n: unknown, decimals = 1): string {
  if (!finite(n)) return DASH;
  const s = n.toFixed(decimals);
  return s.includes('.') ? s.replace(/\.?0+$/, '') : s;
}

/** Milliseconds for humans: "0 ms", "0.42 ms", "4.2 ms", "123 ms", "1.23 s", "12.3 s", "2 min 05 s". */
export function fmtMs(ms: unknown): string {
  if (!finite(ms)) return DASH;
  if (ms < 0) return '-' + fmtMs(-ms);
  if (ms === 0) return '0 ms';
  if (ms < 1) return `${ms.toFixed(2)} ms`;
  if (ms < 10) return `${ms.toFixed(1)} ms`;
  if (ms < 999.5) return `${Math.round(ms)} ms`;
  if (ms < 9995) return `${(ms / 1000).toFixed(2)} s`;
  if (ms < 59950) return `${(ms / 1000).toFixed(1)} s`;
  return fmtDuration(ms / 1000);
}

/** Seconds for an ETA: "8 s", "2 min 05 s", "1 h 02 min". */
export function fmtDuration(s: unknown): string {
  if (!finite(s) || s < 0) return DASH;
  const t = Math.round(s);
  if (t < 60) return `${t} s`;
  if (t < 3600) return `${Math.floor(t / 60)} min ${String(t % 60).padStart(2, '0')} s`;
  return `${Math.floor(t / 3600)} h ${String(Math.floor((t % 3600) / 60)).padStart(2, '0')} min`;
}

/** Bytes with binary units: "512 B", "1.5 KiB", "234.1 MiB", "4.07 GiB". */
export function fmtBytes(b: unknown): string {
  if (!finite(b) || b < 0) return DASH;
  if (b < 1024) return `${Math.round(b)} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = b / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v < 10 ? v.toFixed(2) : v.toFixed(1)} ${units[i]}`;
}

/** Parameter counts: 494032768 → "494M", 1.54e9 → "1.5B"; strings ("7B") pass through. */
export function fmtParams(p: unknown): string {
  if (typeof p === 'string') return p || DASH;
  if (!finite(p) || p <= 0) return DASH;
  if (p >= 1e9) return `${fmtNum(p / 1e9, 1)}B`;
  if (p >= 1e6) return `${Math.round(p / 1e6)}M`;
  if (p >= 1e3) return `${Math.round(p / 1e3)}K`;
  return String(Math.round(p));
}

/** A rate with one decimal: fmtRate(42.46, "tok/s") → "42.5 tok/s". */
export function fmtRate(x: unknown, unit: string): string {
  if (!finite(x)) return DASH;
  return x < 100 ? `${fmtNum(x, 1)} ${unit}` : `${fmtInt(x)} ${unit}`;
}

/** Percent of a ratio: 0.344 → "34%". */
export function fmtPct(ratio: unknown): string {
  if (!finite(ratio)) return DASH;
  return `${Math.round(ratio * 100)}%`;
}

/** "2026-12-02 13:00" in local time, from an RFC 3339 string; the input itself if unparsable. */
export function fmtDate(s: unknown): string {
  if (typeof s !== 'string' || !s) return DASH;
  const d = new Date(s);
  if (Number.isNaN(d.getTime())) return s;
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}`;
}
