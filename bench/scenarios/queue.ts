/**
 * --queue RATE: the sale behind a waiting room admitting RATE buyers a second; each
 * buyer joins, reads its ticket until admitted, and buys with its pass
 * (bench/queue-load.ts). Every order must be an admitted buyer's.
 */
import { bucketKeys } from '../buckets';
import { loadThroughQueueAt, queueVerdict } from '../queue-load';
import { n, queued } from '../rows';
import type { Sale, Scenario } from './scenario';
import { broke } from './scenario';

export function queue({ run, t, productId }: Sale): Scenario | undefined {
  if (!t.queue) return undefined;
  return {
    put: queued(t),
    async load(options, progress, figures) {
      // --target with several URLs: spread over them (one URL, or an app of the bench's: that one).
      const r = await loadThroughQueueAt(t.urls ?? [options.url], options, t.queue, progress);
      figures.queue = r.queue;
      return r.load;
    },
    async judge(verdict, sale, { queue }) {
      if (!queue) return;
      // The waiting room's promise, read from Redis: every order an admitted buyer's.
      const k = t.keys.product(productId);
      const buckets = await bucketKeys(run.client, t.keys, productId);
      const broken = await queueVerdict(run.client, k, sale.orders, sale.perUserLimit, buckets);
      broke(verdict, 'queue', broken);
      run.log(
        `${t.label}: through the waiting room at ${n(queue.admitPerSecond)}/s: ${n(queue.joins)} joins, ${n(queue.reads)} ticket reads, ` +
          `${n(queue.purchases)} purchases; ${n(queue.admitted)} buyers admitted, ${n(queue.turnedAway)} told sold out` +
          (broken ? ` — ${broken}` : ", every order an admitted buyer's"),
      );
    },
  };
}
