/**
 * --pay F: as each 201 arrives its order is paid, cancelled or left (bench/afterlife.ts);
 * after the pass, the orders left unpaid expire at their deadline (the sweeper, by
 * Redis's clock), then a second wave of new buyers, twice the units back in stock, buys
 * them and pays at once. The load the verdict judges is both waves together.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Afterlife, payAll } from '../afterlife';
import { bucketKeys, unitsLeft } from '../buckets';
import { LoadResult, mergeLoads, runLoad } from '../load';
import type { Sale, Scenario } from './scenario';

/** The answers a payment or a cancel may get when it loses to the deadline or to the other: a 409 saying which. */
const LOST_RACE = ['ORDER_EXPIRED', 'ORDER_PAID', 'ORDER_CANCELLED'];

export function pay({ run, t, productId }: Sale): Scenario | undefined {
  const { options } = run;
  if (options.pay === undefined) return undefined;
  let paying: Afterlife;
  return {
    paymentTimeoutMs: options.paymentTimeoutMs,
    begin: () => {
      paying = new Afterlife(t.app.url, options.pay!, t.payer);
    },
    onAnswer: (a) => a.orderId && a.status === 201 && paying.offer(a.orderId),
    async after(load, figures) {
      const outcome = await paying.done();
      // Every bucket's reservations (one, unbucketed): each expires in the bucket that sold it.
      const buckets = await bucketKeys(run.client, t.keys, productId);
      const reserved = async () =>
        (await Promise.all(buckets.map((k) => run.client.zcard(k.deadlines)))).some((n) => n > 0);
      const waitUntil = Date.now() + options.paymentTimeoutMs + 15_000;
      while (await reserved()) {
        if (Date.now() > waitUntil)
          throw new Error(
            `${t.label}: reservations still unexpired ${options.paymentTimeoutMs + 15_000} ms after the sale`,
          );
        await sleep(100);
      }
      const stockLeft = await unitsLeft(run.client, buckets);
      run.log(
        `${t.label}: --pay ${options.pay}: ${outcome.paid} paid, ${outcome.cancelled} cancelled, ${outcome.leftToExpire} left to expire` +
          `${Object.keys(outcome.refused).length ? `, refused ${JSON.stringify(outcome.refused)}` : ''}; ${stockLeft} units back in stock`,
      );
      let second: LoadResult | undefined;
      let secondRefused: Record<string, number> = {};
      if (stockLeft > 0) {
        second = await runLoad({
          url: t.app.url,
          productId,
          buyers: stockLeft * 2,
          duplicates: 0,
          connections: Math.min(options.connections, 50),
          quantity: options.quantity,
          userPrefix: 'w2-',
        });
        secondRefused = await payAll(t.app.url, [...new Set(second.orderIds)], t.payer);
        run.log(
          `${t.label}: second wave: ${stockLeft * 2} buyers bought ${second.orderIds.length} orders of the returned units and paid`,
        );
      }
      figures.afterlife = {
        ...outcome,
        unitsReturned: stockLeft,
        secondWave: {
          buyers: second ? stockLeft * 2 : 0,
          created: second?.orderIds.length ?? 0,
          refused: secondRefused,
        },
      };
      return second ? bothWaves(load, second) : load;
    },
    async judge(verdict, _sale, { afterlife }) {
      // Anything but a lost race (a 5xx, a socket error) is an answer the afterlife should not get.
      const unexpected = [afterlife!.refused, afterlife!.secondWave.refused]
        .flatMap((r) => Object.entries(r))
        .filter(([code]) => !LOST_RACE.includes(code));
      if (unexpected.length === 0) return;
      verdict.invariants.accounting = false;
      const seen = unexpected.map(([code, k]) => `${code} ×${k}`).join(', ');
      verdict.broken.accounting = [verdict.broken.accounting, `payments and cancels answered ${seen}`]
        .filter(Boolean)
        .join('; ');
      verdict.problems.push(`payments and cancels answered ${seen}`);
    },
  };
}

/** The two waves as one load for the verdict and the history: every request, answer and order of both; the first's timing and curve. */
function bothWaves(first: LoadResult, second: LoadResult): LoadResult {
  const { sent, status, codes, errors, timeouts, orderIds, distinctBuyers, requests } = mergeLoads([first, second]);
  return { ...first, sent, status, codes, errors, timeouts, orderIds, distinctBuyers, requests };
}
