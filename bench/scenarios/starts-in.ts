/**
 * --starts-in MS: the sale opens that long after its PUT, by Redis's clock (the one it
 * is judged by); the buyers arrive before it and keep trying (bench/starts-in.ts), and
 * no order may be older than the start.
 */
import { loadUntilOpen, openingOf } from '../starts-in';
import { loadAt } from '../load';
import type { Sale, Scenario } from './scenario';
import { broke } from './scenario';

export function startsIn({ run, t, skewMs }: Sale): Scenario | undefined {
  const { startsInMs } = run.options;
  if (startsInMs === undefined) return undefined;
  const startsAt = Math.ceil(Date.now() + skewMs + startsInMs);
  let waves: { waves: number; notStarted: number } | undefined;
  return {
    put: { startsAt: new Date(startsAt).toISOString() },
    async load(options, progress) {
      const r = await loadUntilOpen(options, startsAt, async () => Date.now() + skewMs, progress, loadAt(t.urls));
      waves = r;
      return r.load;
    },
    async judge(verdict, sale, figures) {
      if (!waves) return;
      // The window's promise, read from Redis: no order older than the start.
      const opening = openingOf(startsAt, sale.orders, waves.waves, waves.notStarted);
      figures.opening = opening;
      broke(verdict, 'window', opening.early > 0 ? `window: ${opening.early} orders written before the start` : null);
      run.log(
        `${t.label}: opened at ${new Date(startsAt).toISOString()} (Redis's clock): ${waves.notStarted} answers SALE_NOT_STARTED over ${waves.waves} waves; ` +
          `the first order ${opening.firstOrderMs} ms after the start, ${opening.firstSecondSold} units sold in the first second, none before the start` +
          (opening.early > 0 ? ` — EXCEPT ${opening.early}` : ''),
      );
    },
  };
}
