// Where questions and passages go: "On this machine" by default; a remote chat, embedding or rerank server
// (Settings / --chat-url, --embed-url, --rerank-url) is named plainly, in the header, on every view.

import { h } from '../dom';
import type { SystemInfo } from '../transport/types';

/** The header's text for a system report: what leaves the machine, and for where. */
export function privacyText(sys: Pick<SystemInfo, 'local' | 'remote'>): string {
  if (sys.local !== false || !sys.remote?.length) return 'On this machine';
  return `Leaves this machine: ${sys.remote.map((r) => `${r.role} → ${hostOf(r.url)}`).join(', ')}`;
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

export class PrivacyBadge {
  // Hidden until the server says: "on this machine" is never claimed unconfirmed.
  readonly el = h('span', { class: 'badge privacy', testid: 'privacy', role: 'status', hidden: true });

  show(sys: Pick<SystemInfo, 'local' | 'remote'>): void {
    this.el.hidden = false;
    const remote = sys.local === false && !!sys.remote?.length;
    this.el.textContent = privacyText(sys);
    this.el.classList.toggle('leaves', remote);
    this.el.title = remote
      ? sys.remote!.map((r) => `${r.url}: ${r.what}`).join('\n')
      : 'Questions, passages and answers stay on this machine';
  }
}
