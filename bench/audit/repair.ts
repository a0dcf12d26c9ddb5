/**
 * `--repair`: what the log has and PostgreSQL lacks (orders the settle group has
 * acknowledged, yet no row: a database restored from an older backup, rows deleted by
 * hand), written into PostgreSQL from the stream's own entries through the settler's
 * idempotent writes (src/settlement/settle-batch.ts writeBatch), one transaction a page.
 * Redis is only read: no stock, no stream, no group is touched, and writing an entry
 * twice changes nothing. A product in escrow buckets: every bucket's stream, its rows
 * under the product's id as the settler writes them. What Redis lacks (an order lost by a failover) it cannot
 * repair: that is a unit sold twice, for a person to settle with the buyer.
 */
import type { Client } from 'pg';
import type { RedisClient } from '../../src/redis/create-client';
import type { KeyLayout } from '../../src/redis/key-layout';
import { parseEntry, writeBatch, type StreamEvent } from '../../src/settlement/settle-batch';
import type { ProductAudit } from './product-audit';
import { PAGE } from './stream-reads';

export interface Repair {
  /** The orders written into PostgreSQL. */
  readonly orderIds: readonly string[];
  /** Stream entries written (each order's own, and what became of it). */
  readonly entries: number;
  readonly line: string;
}

export async function repairProduct(
  redis: RedisClient,
  db: Client,
  productId: string,
  keys: KeyLayout,
  audit: ProductAudit,
): Promise<Repair> {
  const missing = new Set(audit.settled?.missing ?? []);
  if (missing.size === 0)
    return { orderIds: [], entries: 0, line: 'nothing to write: PostgreSQL lacks no settled order of the log' };
  const written = new Set<string>();
  let entries = 0;
  let batch: StreamEvent[] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    await db.query('BEGIN');
    try {
      await writeBatch(db as Parameters<typeof writeBatch>[0], productId, batch);
      await db.query('COMMIT');
    } catch (err) {
      await db.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
    for (const e of batch) written.add(e.orderId);
    entries += batch.length;
    batch = [];
  };
  // An order's entries are all in its bucket's stream, in their order there.
  for (const bucket of audit.buckets) {
    const orders = keys.product(bucket).orders;
    for (let from = '-'; ;) {
      const page = await redis.xrange(orders, from, '+', 'COUNT', PAGE);
      for (const [id, fields] of page) {
        const event = parseEntry(id, fields);
        if (event && missing.has(event.orderId)) batch.push(event);
      }
      if (batch.length >= PAGE) await flush();
      if (page.length < PAGE) break;
      from = `(${page[page.length - 1][0]}`;
    }
  }
  await flush();
  const orderIds = [...written];
  const unfound = missing.size - orderIds.length;
  return {
    orderIds,
    entries,
    line:
      `wrote ${orderIds.length} orders (${entries} stream entries) into PostgreSQL: ${orderIds.join(', ')}` +
      (unfound > 0 ? `; ${unfound} had no entry left in the stream to write from` : ''),
  };
}
