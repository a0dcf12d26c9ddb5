/**
 * The load generator's clock and Redis's on one time line: each reading is one TIME
 * taken mid-round-trip; a link from two readings (the start and the end of a sale) is
 * sure within half the worst round trip (and half a millisecond more) and half the
 * drift between the readings.
 */
import type { Redis } from 'ioredis';
import type { ClockLink } from './history';

/**
 * The clock every request of a history and every reading is taken on: the wall clock at
 * this process's start, then monotonic. A step of the wall clock during a sale (NTP)
 * moves Redis's stamps but not these, so it shows as drift between the readings before
 * and after the sale and widens the link's uncertainty, instead of passing unseen (both
 * sides stepping together) while stream ids, kept monotonic by Redis, stop being write
 * times. Fractions of a millisecond included.
 */
export function historyNow(): number {
  return performance.timeOrigin + performance.now();
}

export interface ClockReading {
  /** Redis's clock less ours, ms. */
  readonly offsetMs: number;
  /** The TIME's round trip, ms. */
  readonly roundTripMs: number;
}

export async function readClock(client: Pick<Redis, 'time'>): Promise<ClockReading> {
  const sent = historyNow();
  const [seconds, micros] = await client.time();
  const answered = historyNow();
  return {
    offsetMs: Number(seconds) * 1000 + Number(micros) / 1000 - (sent + answered) / 2,
    roundTripMs: answered - sent,
  };
}

/** One link from readings taken around a sale: their middle offset, sure within the bound above. */
export function linkClocks(...readings: ClockReading[]): ClockLink {
  if (readings.length === 0) throw new Error('linkClocks needs a reading');
  const offsets = readings.map((r) => r.offsetMs);
  const low = Math.min(...offsets);
  const high = Math.max(...offsets);
  // TIME answered somewhere in the round trip (a millisecond more: a reading's margin).
  const trip = Math.max(...readings.map((r) => (r.roundTripMs + 1) / 2));
  return { offsetMs: (low + high) / 2, uncertaintyMs: trip + (high - low) / 2 };
}
