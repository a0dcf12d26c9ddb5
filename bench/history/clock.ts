/**
 * The load generator's clock and Redis's on one time line: each reading is one TIME
 * taken mid-round-trip; a link from two readings (start and end of a sale) is sure
 * within half the worst round trip, the whole milliseconds, and the drift between them.
 */
import type { Redis } from 'ioredis';
import type { ClockLink } from './history';

export interface ClockReading {
  /** Redis's clock less ours, ms. */
  readonly offsetMs: number;
  /** The TIME's round trip, ms. */
  readonly roundTripMs: number;
}

export async function readClock(_client: Pick<Redis, 'time'>): Promise<ClockReading> {
  throw new Error('not yet');
}

export function linkClocks(..._readings: ClockReading[]): ClockLink {
  throw new Error('not yet');
}
