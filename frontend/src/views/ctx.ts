import type { Trace, Transport, Workspace } from '../transport/types';

/** What views get from the app shell. */
export interface Ctx {
  t: Transport;
  /** Current workspace name ('' if none). */
  workspace(): string;
  /** Opens the latency panel on a trace (object, or request id to fetch). */
  showLatency(trace: Trace | string): void;
  /** A finished answer's trace (with the UI's own measurement merged in). */
  traceFinished(trace: Trace): void;
  /** Shows an error in the global banner. */
  notify(message: string): void;
  /** Workspaces changed (folders/documents): reload the switcher, optionally selecting one. */
  workspacesChanged(select?: string): void;
  /** The names of the workspaces the app knows. */
  workspaceNames?(): string[];
  /** The current workspace's last known state (folders, counts), if any. */
  currentWorkspace?(): Workspace | undefined;
  /** Opens another view. */
  goto?(view: 'library' | 'models' | 'settings'): void;
  /** Whether the server answered the workspace list: false after a failure (the banner says why). */
  reachable?(): boolean;
}
