/**
 * --catalog N: a shop's catalog around the hot sale. Before a row's warm-up, its app
 * lists N idle products (idle-1..idle-N, a little stock each) through the admin API, as
 * an operator would, so Redis holds what the API leaves (each product's sale, its order
 * stream and settle group, its place in the products set); nothing buys them. The row
 * is then the same hot sale as its strategy's row without them, measured in the same run.
 */
import { listProducts } from '../harness/http';
import { n, RowApp, Run } from './rows';

/** Units each idle product is listed with: any stock will do, none is sold. */
const IDLE_STOCK = 10;

/** Ids checked against the products set per SMISMEMBER. */
const CHECK_CHUNK = 1000;

/** What a row's catalog was, as the row's JSON keeps it. */
export interface CatalogFigures {
  /** Idle products the row asked its app to list. */
  readonly products: number;
  /** Of those, how many the products set holds after the listing, read from Redis. */
  readonly listed: number;
  /** Wall time of the listing, ms. */
  readonly listMs: number;
}

/** The idle products' ids: their own, never a measured or warm-up product's. */
export function idleProductIds(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `idle-${i + 1}`);
}

/**
 * Lists the row's catalog through its app, then reads back from Redis that the products
 * set holds every one; throws if not, since the row would measure a smaller catalog than
 * it says.
 */
export async function listCatalog(run: Run, t: RowApp, count: number): Promise<CatalogFigures> {
  const ids = idleProductIds(count);
  // Before the listing: a failed one still leaves its products for the clean-up of a Redis the user named.
  t.products.push(...ids);
  const started = Date.now();
  await listProducts(t.app.url, t.token, ids, IDLE_STOCK);
  const listMs = Date.now() - started;
  let listed = 0;
  for (let i = 0; i < ids.length; i += CHECK_CHUNK) {
    const found = await run.client.smismember(t.keys.products, ...ids.slice(i, i + CHECK_CHUNK));
    listed += found.filter((member) => member === 1).length;
  }
  if (listed !== count)
    throw new Error(`${t.label}: listed ${count} idle products, Redis's products set holds ${listed}`);
  run.log(`${t.label}: ${n(count)} idle products listed through the admin API in ${n(listMs)} ms`);
  return { products: count, listed, listMs };
}
