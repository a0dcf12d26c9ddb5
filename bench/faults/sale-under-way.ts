import type { Redis } from 'ioredis';
import { startSale } from '../../harness/http';
import { RunningApp } from '../../harness/processes';
import type { ProductKeys } from '../../src/redis/key-layout';
import { LoadResult } from '../load';
import type { LoadProgress } from '../progress';
import {
  apps,
  buyersAt,
  Context,
  n,
  PRODUCT,
  saleStarted,
  Size,
  stopsAtWrite,
  TOKEN,
  waitForStop,
  waitUntil,
} from './kit';

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

/**
 * A single `lock` app selling on `redisUrl`, with a load running; resolves once a quarter
 * of the stock is sold. With `stopAtWrite`, it resolves instead once the app has stopped
 * itself (SIGSTOP, FAULT_STOP_AT) before that hold's write: nothing sells until the caller
 * sends SIGCONT, so the sale is mid-way whatever the machine's speed (a quarter seen by
 * polling can be the whole stock by the time the caller acts on it).
 */
export async function saleUnderWay(
  ctx: Context,
  redisUrl: string,
  client: Redis,
  k: ProductKeys,
  env: Record<string, string> = {},
  stopAtWrite?: number,
): Promise<SaleUnderWay> {
  const size: Size = ctx.quick
    ? { buyers: 6_000, stock: 1_500, connections: 100 }
    : { buyers: 20_000, stock: 5_000, connections: 200 };
  const [app] = await apps(1, 'lock', redisUrl, { ...env, ...(stopAtWrite && stopsAtWrite(stopAtWrite)) });
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
  const load = buyersAt(app.url, size.buyers, size.connections, {}, progress);
  if (stopAtWrite) await waitForStop(app, `the app to stop itself at its write ${stopAtWrite}`);
  else
    await waitUntil(
      'a quarter of the stock to sell',
      async () => Number(await client.get(k.stock)) <= size.stock * 0.75,
    );
  return {
    app,
    size,
    load,
    progress,
    sold: size.stock - Number(await client.get(k.stock)),
    stopWatching: () => watch.stop(),
  };
}
