/**
 * `npm run audit`: a sale that ran for real, judged from its stores alone (no buyer's
 * view), read-only and in bounded pages. docs/audit.md says what each check and finding
 * means, and the exit codes.
 *
 *   npm run audit -- --redis redis://host:6379 --database postgres://... --all
 */
import { Cluster } from 'ioredis';
import type { Client } from 'pg';
import type { RedisClient } from '../../src/redis/create-client';
import { KeyLayout } from '../../src/redis/key-layout';
import { CHECKS, type CheckName } from '../history/history';
import { historyLine } from '../history/check';
import { runToExit } from '../entry-point';
import { UsageError } from '../options';
import { closeAudit, connectAudit, ConnectionError, redact } from './connect';
import { parseAuditOptions, type AuditOptions } from './options';
import { auditProduct, NoSaleError, type ProductAudit, saleBuckets, UnjudgedSaleError } from './product-audit';
import { repairProduct, type Repair } from './repair';
import { connectDatabase } from './settled-orders';
import { hasSettleGroup, PAGE } from './stream-reads';

/** Exit codes (docs/audit.md). */
export const EXIT = { holds: 0, finding: 1, usage: 2, notProven: 3 } as const;

/** What each check's finding means, said under it. */
const MEANING: Record<CheckName, string> = {
  oversell:
    'more units were held (orders less returns, in the log’s order) than the stock at that instant: units sold twice, even where returns brought the count back later',
  falseRefusals: 'a buyer refused for want of stock while enough units were free during the whole request',
  outsideWrites: 'an order written outside its request: after its buyer was told no, or before the request was sent',
  perUserLimit: 'a buyer held more units than the sale’s per-user limit at that instant',
  ordersOnce: 'one order id written twice in the log: its units were taken twice',
  returns: 'a unit came back twice, or came back for an order the log never had: stock given back that was not taken',
  totalQueue:
    'Redis and PostgreSQL (the system of record) disagree: an order PostgreSQL has and Redis lacks was acknowledged, settled, then lost by Redis (a failover without WAIT), and its unit was sold again; one Redis has and PostgreSQL lacks, though settled, is not on record; a status that differs missed a payment, cancel or expiry; an order twice is a double write',
};

/** The checks the audit cannot run: they need what each buyer was told. */
const CLIENT_CHECKS: readonly CheckName[] = ['falseRefusals', 'outsideWrites'];

/** A product not audited, and why; `unjudged`: a sale there that could not be judged (the run is not proven). */
interface Skipped {
  readonly productId: string;
  readonly why: string;
  readonly unjudged: boolean;
}

interface Audited extends ProductAudit {
  readonly productId: string;
  readonly repair?: Repair;
}

async function main(): Promise<number> {
  const options = parseAuditOptions(process.argv.slice(2));
  const redis = await connectAudit(options.redis);
  let db: Client | null = null;
  try {
    if (options.database) {
      try {
        db = await connectDatabase(options.database, { write: options.repair });
      } catch (err) {
        throw new ConnectionError(`cannot read PostgreSQL at ${redact(options.database)}: ${(err as Error).message}`);
      }
    }
    const keys = new KeyLayout(options.keyPrefix);
    // A product named that has no sale is the user's mistake, said before anything else.
    for (const productId of options.products ?? []) {
      const [stock] = await redis.hmget(keys.product(productId).meta, 'initialStock');
      if (stock === null)
        throw new UsageError(`no sale of product "${productId}" under the key prefix ${options.keyPrefix}`);
    }
    // --all on a prefix with no products (a mistyped --key-prefix) audits nothing: no pass.
    if (options.products === null && (await productsOf(redis, keys, options).next()).done)
      throw new UsageError(
        `no product found under the key prefix ${options.keyPrefix} (its ${keys.products} is empty)`,
      );
    // Repair writes only what the settle group acknowledged: a sale without the group is
    // not settled into PostgreSQL, and its orders are not PostgreSQL's to hold. Refused
    // before anything is written.
    if (options.repair) {
      for await (const productId of productsOf(redis, keys, options)) {
        // Over escrow buckets, every bucket's log has the group, or the sale is not settled.
        for (const bucket of await saleBuckets(redis, keys, productId)) {
          if (await hasSettleGroup(redis, keys.product(bucket).orders)) continue;
          const log = bucket === productId ? 'its order log' : `the order log of its bucket ${bucket}`;
          throw new Refusal(
            `--repair refused: product "${productId}" is not settled into PostgreSQL (${log} has no \`settle\` consumer group), so PostgreSQL lacks none of its orders; nothing was written`,
          );
        }
      }
    }
    const audited: Audited[] = [];
    const print = (line: string) => {
      if (options.json) return;
      process.stdout.write(`${line}\n`);
      reportStarted = true;
    };
    print(
      `audit of ${redact(options.redis)} (${redis instanceof Cluster ? 'Redis Cluster' : 'one Redis'}), key prefix ${options.keyPrefix}` +
        (options.database ? `, against PostgreSQL at ${redact(options.database)}` : ', without PostgreSQL'),
    );
    const skipped: Skipped[] = [];
    for await (const productId of productsOf(redis, keys, options)) {
      let audit: Audited;
      try {
        audit = { productId, ...(await auditProduct(redis, db, productId, keys)) };
      } catch (err) {
        if (!(err instanceof NoSaleError)) throw err;
        // A member of the products set whose meta is gone: nothing to judge it against.
        // One the audit cannot judge (a bucket of its escrow buckets without a sale, its
        // buckets in two sales) leaves the run not proven.
        print(`\nproduct ${productId}: skipped, ${err.message}`);
        skipped.push({ productId, why: err.message, unjudged: err instanceof UnjudgedSaleError });
        continue;
      }
      if (options.repair && db) {
        const repair = await repairProduct(redis, db, productId, keys, audit);
        // Judged again after the repair: the exit code says what holds now.
        if (repair.orderIds.length > 0)
          audit = { productId, ...(await auditProduct(redis, db, productId, keys)), repair };
        else audit = { ...audit, repair };
      }
      audited.push(audit);
      for (const line of productLines(audit)) print(line);
    }
    const unjudged = skipped.some((s) => s.unjudged);
    const code = unjudged && exitCode(audited) === EXIT.holds ? EXIT.notProven : exitCode(audited);
    if (options.json)
      process.stdout.write(`${JSON.stringify(document(options, redis, audited, skipped, code), null, 2)}\n`);
    else print(summary(audited, code));
    return code;
  } finally {
    await Promise.allSettled([closeAudit(redis), db?.end()]);
  }
}

/** The named products, or every product of the prefix: its products set, SSCAN a page at a time. */
async function* productsOf(redis: RedisClient, keys: KeyLayout, options: AuditOptions): AsyncGenerator<string> {
  if (options.products !== null) {
    yield* options.products;
    return;
  }
  // SSCAN may return a member twice; a set of ids is small beside any product's log.
  const seen = new Set<string>();
  let cursor = '0';
  do {
    const [next, members] = await redis.sscan(keys.products, cursor, 'COUNT', PAGE);
    for (const id of members.sort()) if (!seen.has(id) && seen.add(id)) yield id;
    cursor = next;
  } while (cursor !== '0');
}

function exitCode(audited: readonly Audited[]): number {
  const states = audited.flatMap((a) => Object.values(a.report.checks));
  if (states.includes('fail')) return EXIT.finding;
  if (states.includes('not proven')) return EXIT.notProven;
  return EXIT.holds;
}

function productLines(a: Audited): string[] {
  const r = a.report;
  const { log } = a;
  const lines = [
    '',
    `product ${a.productId}: stock ${r.stock}, per-user limit ${a.perUserLimit}; ` +
      `log ${log.entries + log.fromDatabase} entries (orders ${r.orders}, returns ${r.returns}, paid ${r.paid})` +
      (log.first ? ` from ${log.first} to ${log.last}` : '') +
      (log.fromDatabase > 0
        ? `, its head trimmed (SETTLE_TRIM) and rebuilt from PostgreSQL's order_events (${log.fromDatabase} entries)`
        : log.complete
          ? ''
          : ', its head trimmed (SETTLE_TRIM)'),
    ...(a.buckets.length > 1
      ? [
          `  judged over ${a.buckets.length} escrow buckets (${a.buckets.join(', ')}): their logs merged on Redis's clock (each shard's own), against the sum of their stocks`,
        ]
      : []),
    ...(log.cut !== null
      ? [
          `  the sale went on while its buckets were read: judged up to ${log.cut} (ms, Redis's clock), the first entry written after the read began; ${log.beyond} entries from then on not judged`,
        ]
      : []),
    `  ${historyLine(r)}`,
  ];
  for (const check of CHECKS) {
    const state = r.checks[check];
    const count = r.counts[check];
    const why =
      CLIENT_CHECKS.includes(check) && state === 'not run'
        ? ' (needs what each buyer was told: npm run bench, npm run faults)'
        : '';
    lines.push(`  ${check.padEnd(14)} ${state}${count > 0 ? `, ${count} found` : ''}${why}`);
  }
  if (a.settled) {
    const s = a.settled;
    lines.push(
      `  PostgreSQL: ${s.rows} rows; ${s.earlierSales} of an earlier sale of this product id (not judged)` +
        (s.unsettled.length > 0 ? `; ${s.unsettled.length} orders not settled yet (not judged)` : '') +
        (s.afterRead > 0 ? `; ${s.afterRead} written after the log was read (not judged)` : ''),
    );
  }
  for (const check of CHECKS.filter((c) => r.counts[c] > 0)) {
    const found = check === 'totalQueue' ? a.totalQueue : r.findings.filter((f) => f.check === check);
    for (const f of found) {
      lines.push(`  ${check}${f.ms === null ? '' : ` at ${new Date(f.ms).toISOString()}`}: ${f.detail}`);
      if (f.orderIds.length > 1) lines.push(`    orders: ${f.orderIds.join(', ')}`);
    }
    if (found.length < r.counts[check]) lines.push(`  ${check}: ${r.counts[check] - found.length} more, not listed`);
    lines.push(`  ${check}, what it means: ${MEANING[check]}`);
  }
  for (const line of r.notProven) lines.push(`  not proven: ${line}`);
  if (a.repair) lines.push(`  repair: ${a.repair.line}`);
  return lines;
}

function summary(audited: readonly Audited[], code: number): string {
  const failed = audited.filter((a) => Object.values(a.report.checks).includes('fail'));
  const unproven = audited.filter((a) => !failed.includes(a) && Object.values(a.report.checks).includes('not proven'));
  const held = audited.length - failed.length - unproven.length;
  const names = (list: readonly Audited[]) => (list.length > 0 ? ` (${list.map((a) => a.productId).join(', ')})` : '');
  return (
    `\nsummary: ${audited.length} products audited: ${held} hold, ${failed.length} with findings${names(failed)}, ` +
    `${unproven.length} not proven${names(unproven)}; exit ${code}`
  );
}

function document(
  options: AuditOptions,
  redis: RedisClient,
  audited: readonly Audited[],
  skipped: readonly Skipped[],
  code: number,
) {
  return {
    redis: redact(options.redis),
    cluster: redis instanceof Cluster,
    keyPrefix: options.keyPrefix,
    database: options.database ? redact(options.database) : null,
    products: audited.map((a) => ({
      ...a.report,
      perUserLimit: a.perUserLimit,
      buckets: a.buckets,
      log: a.log,
      settled: a.settled,
      // Every order of the total-queue check named, not only the report's first few.
      totalQueue: a.totalQueue,
      ...(a.repair && { repair: a.repair }),
    })),
    skipped,
    exitCode: code,
  };
}

/** Entry point (scripts/audit.js): one line and exit 2 for bad flags or a store it cannot read. */
export function cli(): void {
  runToExit(main, {
    failed: (err) => {
      const line = `audit: ${oneLine(err)}`;
      // A report cut short must not read as a whole one: its end says it failed.
      if (reportStarted)
        process.stdout.write(
          `\nFAILED: the audit stopped before it finished, the report above is incomplete; ${line}\n`,
        );
      process.stderr.write(`${line}\n`);
      return EXIT.usage;
    },
  });
}

/** A run the audit will not do (it says why); exit 2, nothing written. */
class Refusal extends Error {}

/** Whether a line of the report is on stdout: a failure after it must say the report is cut short. */
let reportStarted = false;

function oneLine(err: Error): string {
  const said =
    err instanceof UsageError
      ? `${err.message} (npm run audit -- --help)`
      : err instanceof ConnectionError || err instanceof Refusal
        ? err.message
        : `cannot finish the audit: ${messageOf(err)}`;
  return said.replace(/\s*\n\s*/g, ' ');
}

/** An error's message; an AggregateError (a host's every address refused) has none of its own. */
function messageOf(err: Error): string {
  if (err.message) return err.message;
  const inner = err instanceof AggregateError ? err.errors.map((e) => (e as Error).message).filter(Boolean) : [];
  return inner.length > 0 ? inner.join('; ') : err.name;
}
