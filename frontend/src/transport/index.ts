import { HttpTransport } from './http';
import type { Transport } from './types';
import { WailsTransport, type WailsWindow } from './wails';

export * from './types';
export { HttpTransport } from './http';
export { WailsTransport } from './wails';

/**
 * Picks the transport at start: the Wails bindings when `window.go` exists (desktop app), HTTP otherwise.
 * A `?token=` still present in the page URL (the server normally turns it into a cookie and redirects) is
 * used as a bearer token and removed from the address bar and history.
 */
export function pickTransport(w: Window = window): Transport {
  const ww = w as unknown as WailsWindow;
  if (ww.go && typeof ww.go === 'object') return new WailsTransport(ww);
  return new HttpTransport({ token: takeURLToken(w) });
}

/**
 * Like pickTransport, but if the page is inside Wails and its runtime has not yet created `window.go`
 * (bindings are set up by injected scripts), waits for it briefly first.
 */
export async function pickTransportWhenReady(w: Window = window, timeoutMs = 2000): Promise<Transport> {
  const inWails = () => 'WailsInvoke' in w || 'wailsbindings' in w || 'runtime' in w;
  if (!(w as unknown as WailsWindow).go && inWails()) {
    const until = Date.now() + timeoutMs;
    while (!(w as unknown as WailsWindow).go && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  }
  return pickTransport(w);
}

export function takeURLToken(w: Window): string | undefined {
  let url: URL;
  try {
    url = new URL(w.location.href);
  } catch {
    return undefined;
  }
  const token = url.searchParams.get('token') ?? undefined;
  if (token !== undefined) {
    url.searchParams.delete('token');
    try {
      w.history.replaceState(w.history.state, '', url.pathname + url.search + url.hash);
    } catch {
      /* opaque origins: ignore */
    }
  }
  return token || undefined;
}
