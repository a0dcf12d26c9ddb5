/**
 * --settle on: the row's app settles every order into its own PostgreSQL database;
 * the lag is sampled through the sale, and after it settlement must catch up and hold
 * every order once, with the status Redis has (bench/settled.ts). The drain is timed
 * from the end of the last load; each order's own lag (stream entry to PostgreSQL) is
 * read from PostgreSQL once it has caught up.
 */
import type { ProductKeys } from '../../src/redis/key-layout';
import { bucketKeys } from '../buckets';
import type { SettlementRow } from '../report';
import { checkSettled, orderLag, unsettled, waitForSettlement } from '../settled';
import type { Sale, Scenario } from './scenario';

export function settle({ run, t, productId, skewMs }: Sale): Scenario | undefined {
  if (!t.databaseUrl) return undefined;
  // Every bucket's stream and states (one, unbucketed): read once the sale is set up.
  let buckets: Promise<ProductKeys[]> | undefined;
  const bucketsOf = () => (buckets ??= bucketKeys(run.client, t.keys, productId));
  const points: SettlementRow['lag'] = [];
  let timer: NodeJS.Timeout | undefined;
  let settled: { ok: boolean; problem?: string } = { ok: true };
  return {
    // The measured product's unsettled entries every 200 ms until it has drained: the report's lag line.
    begin() {
      const start = Date.now();
      timer = setInterval(() => {
        void bucketsOf()
          .then((k) => unsettled(run.client, k))
          .then(
            (n) => points.push({ ms: Date.now() - start, unsettled: n }),
            () => undefined,
          );
      }, 200);
    },
    async after(load, figures) {
      const { afterlife } = figures;
      const k = await bucketsOf();
      const drainMs = await waitForSettlement(run.client, k, 60_000);
      clearInterval(timer);
      if (drainMs === null) {
        const problem = `settled: settlement had not caught up 60 s after the sale (${await unsettled(run.client, k)} entries unsettled)`;
        settled = { ok: false, problem };
        figures.settlement = { drainMs, rows: 0, byStatus: {}, lag: points, ...(afterlife && { afterlife }) };
        return load;
      }
      const check = await checkSettled(t.databaseUrl!, run.client, k, productId);
      run.log(
        `${t.label}: settled into PostgreSQL ${drainMs} ms after the last answer: ${check.rows} orders (${Object.entries(
          check.byStatus,
        )
          .map(([s, n]) => `${s} ${n}`)
          .join(', ')})${check.ok ? ', each once, as Redis has them' : `; ${check.problem}`}`,
      );
      settled = { ok: check.ok, ...(check.problem && { problem: check.problem }) };
      figures.settled = { [productId]: check.orders };
      // The bench's PostgreSQL runs here; so does its Redis unless --redis names one, whose clock may differ.
      const lag = await orderLag(t.databaseUrl!, productId, run.options.redis ? skewMs : null);
      figures.settlement = {
        drainMs,
        rows: check.rows,
        byStatus: check.byStatus,
        lag: points,
        ...(lag && { orderLag: lag }),
        ...(afterlife && { afterlife }),
      };
      return load;
    },
    async judge(verdict) {
      verdict.invariants.settled = settled.ok;
      if (!settled.ok) {
        verdict.broken.settled = settled.problem;
        verdict.problems.push(settled.problem!);
      }
    },
  };
}
