/**
 * Machine-readable progress for the lab (bench/lab): with LAB_EVENTS_FD set, the bench
 * and the fault suite write one JSON object per line to that file descriptor, as things
 * happen (a sale starts, units sold so far, a fault's named step, a verdict). Without
 * it, nothing: the CLI's output is unchanged. A pipe the lab opened for the child, so
 * the events never mix with the human-readable lines on stdout and stderr.
 */
import { writeSync } from 'node:fs';

export type LabEvent =
  | {
      readonly type: 'sale';
      readonly label: string;
      readonly stock: number;
      readonly requests: number;
      readonly attempt: number;
    }
  | {
      readonly type: 'progress';
      readonly label: string;
      /** Since the sale's load started. */
      readonly ms: number;
      readonly done: number;
      readonly sold: number;
      readonly stock: number;
      readonly codes: Readonly<Record<string, number>>;
    }
  | { readonly type: 'scenario'; readonly name: string }
  | { readonly type: 'step'; readonly step: string; readonly detail?: string; readonly ms: number }
  | {
      readonly type: 'outcome';
      readonly name: string;
      readonly pass: boolean;
      readonly line: string;
      readonly problems: readonly string[];
      readonly lesson?: string;
      readonly sold: number;
      readonly left: number;
      readonly oversold?: number;
      readonly story: string;
      /** The history checker's line (bench/history/check.ts historyLine), when the scenario was judged as a history. */
      readonly history?: string;
    };

const fd = process.env.LAB_EVENTS_FD ? Number(process.env.LAB_EVENTS_FD) : null;
/** When the current sale or scenario started: its events' `ms` count from here. */
let origin = Date.now();

/** True when someone listens: a caller may then sample what only the lab wants. */
export const eventsOn = fd !== null && Number.isInteger(fd);

/** Writes one event line, synchronously, so none is lost when the process exits right after. */
export function emit(event: LabEvent): void {
  if (event.type === 'sale' || event.type === 'scenario') origin = Date.now();
  if (!eventsOn) return;
  const bytes = Buffer.from(`${JSON.stringify(event)}\n`);
  for (let at = 0; at < bytes.length;) {
    try {
      at += writeSync(fd!, bytes, at);
    } catch (err) {
      // The reader went away (the lab stopped): the run goes on without it.
      if ((err as NodeJS.ErrnoException).code === 'EAGAIN') continue;
      return;
    }
  }
}

/** Ms since the current sale or scenario began: an event's place on the run's time axis. */
export function sinceOrigin(): number {
  return Date.now() - origin;
}
