/**
 * How fast the settler writes orders into PostgreSQL, alone: `npm run bench:settle --
 * [entries] [batch]` puts that many order entries (the purchase scripts' shape) in a
 * product's stream of a private Redis, then times the real Settler draining them into a
 * private PostgreSQL, and checks every one arrived once. The sale bench shows whether
 * settlement keeps pace with a sale; this shows its own ceiling.
 */
import { Redis } from 'ioredis';
import { startPrivatePostgres } from '../harness/postgres';
import { stopAll } from '../harness/processes';
import { startPrivateRedis } from '../harness/redis';
import { newOrderId } from '../src/orders/order';
import { KeyLayout } from '../src/redis/key-layout';
import { markWritten } from '../src/redis/shard-marks';
import { migrate } from '../src/settlement/migrations';
import { createPool } from '../src/settlement/postgres';
import { Settler } from '../src/settlement/settler';

async function main(entries: number, batch: number): Promise<string> {
  const [redis, pg] = await Promise.all([startPrivateRedis(), startPrivatePostgres()]);
  const db = await pg.createDatabase('settle_speed');
  const client = new Redis(redis.url);
  const keys = new KeyLayout('speed:');
  const k = keys.product('hot');
  await client.sadd(keys.products, 'hot');
  for (let i = 0; i < entries; i += 1_000) {
    const p = client.pipeline();
    for (let j = i; j < Math.min(entries, i + 1_000); j++) {
      p.xadd(k.orders, '*', 'orderId', newOrderId('hot'), 'userId', `b${j}`, 'quantity', '1', 'fence', '1');
    }
    await p.exec();
  }
  await markWritten(client, keys, 'hot');
  const pool = createPool({ databaseUrl: db, pgStatementTimeoutMs: 5_000 });
  try {
    await migrate(pool);
    const settler = new Settler(client, pool, keys, {
      settleBatch: batch,
      settleClaimIdleMs: 10_000,
      settleTrim: false,
    });
    const cpu = process.cpuUsage();
    const start = performance.now();
    for (let done = 0; done < entries;) done += await settler.settleOnce();
    const ms = performance.now() - start;
    const used = process.cpuUsage(cpu);
    const { rows } = await pool.query<{ n: number }>('SELECT count(DISTINCT order_id)::int AS n FROM orders');
    if (rows[0].n !== entries) throw new Error(`${rows[0].n} orders in PostgreSQL for ${entries} entries`);
    return (
      `settled ${entries.toLocaleString('en-US')} orders in ${Math.round(ms).toLocaleString('en-US')} ms: ` +
      `${Math.round((entries / ms) * 1000).toLocaleString('en-US')} orders/s, batches of ${batch} ` +
      `(${Math.ceil(entries / batch)} transactions), settler CPU ${Math.round((used.user + used.system) / entries)} µs/order; ` +
      `every order in PostgreSQL once (Node ${process.version})`
    );
  } finally {
    await pool.end();
    client.disconnect();
  }
}

/** Entry point (scripts/settle-speed.js). */
export function cli(): void {
  const [entries = '100000', batch = '1000'] = process.argv.slice(2);
  main(Number(entries), Number(batch))
    .then(async (line) => {
      process.stdout.write(`${line}\n`);
      await stopAll();
      process.exit(0);
    })
    .catch(async (err: Error) => {
      process.stderr.write(`[bench:settle] failed: ${err.stack ?? err.message}\n`);
      await stopAll();
      process.exit(1);
    });
}
