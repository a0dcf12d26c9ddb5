/**
 * `--starts-in MS`: a sale that opens at a time, and its buyers, who arrive before it
 * and keep trying. Each buyer refused SALE_NOT_STARTED asks again when its answer says
 * (Retry-After, or sooner the startsAt it names: a careful client reads both), so the
 * herd is at the door when the sale opens. The waves' answers are
 * one load for the verdict: every request answered once, and the orders judged from
 * Redis, plus the window's own promise: no order older than the start.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { OrderEntry } from './verdict';
import { Answer, LoadOptions, LoadResult, mergeLoads, runLoad } from './load';
import type { LoadProgress } from './progress';

/** Waves at most: a sale whose start never comes is a broken bench, not a long one. */
const MAX_WAVES = 100;

export interface Opening {
  /** startsAt, ms on Redis's clock. */
  readonly startsAt: number;
  /** Waves of requests sent until no buyer was told SALE_NOT_STARTED. */
  readonly waves: number;
  /** SALE_NOT_STARTED answers, all waves. */
  readonly notStarted: number;
  /** Orders older than the start (Redis's clock): the window broken. */
  readonly early: number;
  /** Units sold in the first second after the start, and when the first order was written (ms after it). */
  readonly firstSecondSold: number;
  readonly firstOrderMs: number | null;
}

/**
 * Sends every buyer once, then again each one told SALE_NOT_STARTED, until none is.
 * `redisNow` reads Redis's clock (ms), which the start and the orders are on.
 */
export async function loadUntilOpen(
  options: LoadOptions,
  startsAt: number,
  redisNow: () => Promise<number>,
  progress: LoadProgress,
  /** How a wave is fired: one burst at the app, or spread over a deployment's URLs. */
  load: (options: LoadOptions, progress: LoadProgress) => Promise<LoadResult> = runLoad,
): Promise<{ load: LoadResult; waves: number; notStarted: number }> {
  const loads: LoadResult[] = [];
  let waiting: string[] | undefined;
  let notStarted = 0;
  for (let wave = 1; wave <= MAX_WAVES; wave++) {
    const refused: string[] = [];
    const fired = await load(
      {
        ...options,
        ...(waiting && { userIds: waiting, buyers: waiting.length, duplicates: 0 }),
        onAnswer: (a: Answer) => {
          options.onAnswer?.(a);
          if (a.code === 'SALE_NOT_STARTED') refused.push(a.userId);
        },
      },
      progress,
    );
    loads.push(fired);
    notStarted += refused.length;
    if (refused.length === 0) {
      const merged = mergeLoads(loads);
      const end = loads[loads.length - 1];
      return {
        // Every buyer was answered in the first wave; the later waves are the same buyers again.
        load: {
          ...merged,
          distinctBuyers: loads[0].distinctBuyers,
          durationMs: end.startedAt + end.durationMs - merged.startedAt,
        },
        waves: wave,
        notStarted,
      };
    }
    // Retry-After is the seconds to the start, rounded up, so it never comes before the
    // start; the body's startsAt says when exactly. A careful client waits for the earlier
    // of the two, the start, and is at the door when the sale opens.
    await sleep(Math.max(0, startsAt - (await redisNow())));
    waiting = refused;
  }
  throw new Error(`the sale had not opened after ${MAX_WAVES} waves of buyers`);
}

/** What the opening sold, from the orders Redis holds. */
export function openingOf(startsAt: number, orders: readonly OrderEntry[], waves: number, notStarted: number): Opening {
  const early = orders.filter((o) => o.ms < startsAt).length;
  const firstSecondSold = orders
    .filter((o) => o.ms >= startsAt && o.ms < startsAt + 1_000)
    .reduce((a, o) => a + o.quantity, 0);
  const first = orders.length > 0 ? Math.min(...orders.map((o) => o.ms)) - startsAt : null;
  return { startsAt, waves, notStarted, early, firstSecondSold, firstOrderMs: first };
}
