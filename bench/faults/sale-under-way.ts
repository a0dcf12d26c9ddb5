import type { Redis } from 'ioredis';
import { startSale } from '../../harness/http';
import { RunningApp } from '../../harness/processes';
import type { ProductKeys } from '../../src/redis/key-layout';
import { LoadResult } from '../load';
import type { LoadProgress } from '../progress';
import { apps, buyersOf, Context, n, PRODUCT, saleStarted, Size, TOKEN, waitUntil } from './kit';

export interface SaleUnderWay {
  readonly app: RunningApp;
  readonly size: Size;
  readonly load: Promise<LoadResult>;
  /** Answers so far, updated as they arrive (a later wave may count on it too). */
  readonly progress: LoadProgress;
  /** Units sold when it resolved. */
  readonly sold: number;
  /** Ends the lab's live line of the sale: call once the scenario's loads are over. */
  stopWatching(): void;
}

/** A single `lock` app selling on `redisUrl`, with a load running; resolves once a quarter of the stock is sold. */
export async function saleUnderWay(
  ctx: Context,
  redisUrl: string,
  client: Redis,
  k: ProductKeys,
  env: Record<string, string> = {},
): Promise<SaleUnderWay> {
  const size: Size = ctx.quick
    ? { buyers: 6_000, stock: 1_500, connections: 100 }
    : { buyers: 20_000, stock: 5_000, connections: 200 };
  const [app] = await apps(1, 'lock', redisUrl, env);
  await startSale(app.url, TOKEN, PRODUCT, size.stock, 1);
  const progress: LoadProgress = { done: 0 };
  const watch = saleStarted(
    'lock, 1 app',
    size.stock,
    size.buyers,
    progress,
    () => client.get(k.stock),
    `${n(size.stock)} units, ${n(size.buyers)} buyers, one lock app (pid ${app.pid})`,
  );
  const load = buyersOf(app, size, progress);
  await waitUntil('a quarter of the stock to sell', async () => Number(await client.get(k.stock)) <= size.stock * 0.75);
  return {
    app,
    size,
    load,
    progress,
    sold: size.stock - Number(await client.get(k.stock)),
    stopWatching: () => watch.stop(),
  };
}
