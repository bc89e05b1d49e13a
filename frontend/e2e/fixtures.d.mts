// Types for the unit tests that import e2e/fixtures.mjs.
export type Shape = unknown;
export function shapeOf(v: unknown, key?: string): Shape;
export function shapeDiff(fixture: Shape, live: Shape, path?: string, optional?: Set<string>): { problems: string[]; added: string[] };
export function compareRecordings(fixture: Record<string, unknown>, live: Record<string, unknown>, optional?: Set<string>): { problems: string[]; added: string[] };
export function omitEmpty(appDir?: string): Set<string>;
export function parseSSE(body: string): Array<{ event: string; data: unknown }>;
