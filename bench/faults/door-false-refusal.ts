/**
 * The door's trust in a refusal it learnt (src/door/door-refusals.ts): it repeats a
 * SOLD_OUT for DOOR_TRUST_MS without asking Redis, so a unit returned meanwhile is
 * refused while it sits in stock: a false refusal the history checker must name (the
 * lesson of door-false-refusal, docs/door.md). Waits for states (an answer Redis was
 * not asked for), never for a lucky moment.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { JsonResponse, request, startSale } from '../../harness/http';
import { DOOR_TRUST_MS } from '../../src/door/door-refusals';
import { Answers, sold } from './door';
import { apps, Context, harnessClient, n, onPrivateRedis, Outcome, PRODUCT, timeline, TOKEN } from './kit';
/**
 * How long after a unit's return (its cancel answered) the door's refusal is asked for.
 * Asked at once, the checker cannot prove it false: the return's entry and the request's
 * start lie within the clocks' resolution of each other (a millisecond each side and
 * twice the link's uncertainty, ±3 to ±4 ms here), so the refusal is undecided (run with
 * no wait: "0 false refusals of 2 refusals (2 undecided)"). 100 ms is far more than that
 * blur (it would take a TIME round trip near 100 ms to undo it) and leaves the door 150
 * ms of its trust for the cancel's answer: a cycle that overruns it is simply repeated.
 */
const RETURN_GAP_MS = 100;
/** Cycles of "learn the sell-out, return a unit, ask" before the line says the door never answered. */
const MAX_CYCLES = 20;

/**
 * Whether the app asked Redis for the product's stock while a request ran: every
 * purchase the route serves reads it first (readSale's GET), an answer at the door reads
 * nothing. MONITOR's lines come in the order Redis ran the commands, so a marker ECHOed
 * before the request and one after its answer bound it: no timing involved.
 */
async function stockReads(client: ReturnType<typeof harnessClient>, stockKey: string) {
  const monitor = await client.monitor();
  let reads = 0;
  let marks = 0;
  const seen = new Map<string, () => void>();
  monitor.on('monitor', (_time: string, args: string[]) => {
    const command = args[0]?.toLowerCase();
    if (command === 'get' && args[1] === stockKey) reads++;
    if (command === 'echo') seen.get(args[1])?.();
  });
  const mark = async () => {
    const marker = `door-false-refusal-mark-${++marks}`;
    const shown = new Promise<void>((resolve) => seen.set(marker, resolve));
    await client.echo(marker);
    await shown;
    seen.delete(marker);
  };
  return {
    async during<T>(ask: () => Promise<T>): Promise<{ answer: T; asked: boolean }> {
      await mark();
      const before = reads;
      const answer = await ask();
      await mark();
      return { answer, asked: reads > before };
    },
    close: () => monitor.disconnect(),
  };
}

/**
 * The door's trust window, forced: a small stock sold out through the door's route, a
 * buyer refused SOLD_OUT by Redis (the door learns it), one reservation cancelled (its
 * unit back in stock), and RETURN_GAP_MS later a buyer through the same route, refused
 * SOLD_OUT by the door's memory while the unit sits in stock. The history checker must
 * name that buyer's refusal false (the lesson, falseRefusals); every other promise holds,
 * and once the trust lapses the refused buyer buys the unit. The window is wall time, so
 * the cycle repeats (the unit sold again, the refusal learnt again, a cancel, an ask)
 * until the door answered from its memory, as MONITOR tells (Redis not asked), or the
 * line fails after MAX_CYCLES.
 */
export async function falseRefusalAtDoor(ctx: Context): Promise<Outcome> {
  return onPrivateRedis(async (stage) => {
    const { redis, client, k } = stage;
    const stock = ctx.quick ? 2 : 5;
    const answers = new Answers();
    const problems: string[] = [];
    const [app] = await apps(1, 'fenced', redis.url);
    // Reservations that stay reserved until cancelled: no expiry returns a unit behind the line's back.
    await startSale(app.url, TOKEN, PRODUCT, stock, 1, 600_000);
    const purchase = (userId: string) => answers.send(app.url, 'POST', `/api/products/${PRODUCT}/orders`, { userId });
    const held: string[] = [];
    for (let i = 0; i < stock; i++) {
      const res = await purchase(`b${i}`);
      if (res.status !== 201) throw new Error(`b${i} could not buy: ${res.status} ${JSON.stringify(res.body)}`);
      held.push(res.body.orderId as string);
    }
    timeline('sold out', `${n(stock)} units bought through POST /api/products/${PRODUCT}/orders, the door's route`);
    const reads = await stockReads(client, k.stock);
    let refused: { userId: string; cycle: number; orderId: string } | undefined;
    let lapsed = 0;
    try {
      for (let cycle = 1; cycle <= MAX_CYCLES && !refused && problems.length === 0; cycle++) {
        const learner = await reads.during(() => purchase(`l${cycle}`));
        if (learner.answer.body.code !== 'SOLD_OUT' || !learner.asked) {
          problems.push(
            `l${cycle} was answered ${learner.answer.status} ${String(learner.answer.body.code)} ` +
              `${learner.asked ? 'by Redis' : 'at the door'}, not SOLD_OUT by Redis`,
          );
          break;
        }
        timeline(
          'door learnt SOLD_OUT',
          `l${cycle} refused SOLD_OUT by Redis; the door repeats it for ${DOOR_TRUST_MS} ms`,
        );
        const orderId = held.shift()!;
        const cancel = await request(app.url, 'POST', `/api/orders/${orderId}/cancel`);
        if (cancel.status !== 200)
          throw new Error(`cancelling ${orderId}: ${cancel.status} ${JSON.stringify(cancel.body)}`);
        timeline('unit returned', `order ${orderId} cancelled: 1 unit back in stock`);
        await sleep(RETURN_GAP_MS);
        const userId = `a${cycle}`;
        const ask = await reads.during(() => purchase(userId));
        if (ask.answer.status === 201) {
          // The door's memory had lapsed: Redis sold the unit. Sold out again: another cycle.
          held.push(ask.answer.body.orderId as string);
          lapsed++;
          timeline(
            'door asked Redis',
            `${userId} bought the returned unit: the door's ${DOOR_TRUST_MS} ms had run out; again`,
          );
        } else if (ask.answer.body.code === 'SOLD_OUT' && !ask.asked) {
          refused = { userId, cycle, orderId };
          timeline(
            'refused at the door',
            `${userId} refused SOLD_OUT from the door's memory, Redis not asked, with order ${orderId}'s unit in stock`,
          );
        } else {
          problems.push(
            `${userId}, asking after a return, was answered ${ask.answer.status} ${String(ask.answer.body.code)} ` +
              `${ask.asked ? 'by Redis' : 'at the door'}`,
          );
        }
      }
    } finally {
      reads.close();
    }
    if (!refused && problems.length === 0) {
      problems.push(
        `the door never answered from its memory in ${MAX_CYCLES} cycles: each ask after a return reached Redis ` +
          `(its ${DOOR_TRUST_MS} ms ran out before it every time)`,
      );
    }
    // The door's trust runs from its last learnt refusal, before the ask: past it, the
    // refused buyer's purchase goes to Redis and buys the unit it was refused.
    let after: JsonResponse<Record<string, unknown>> | undefined;
    if (refused) {
      await sleep(DOOR_TRUST_MS + 10);
      after = await purchase(refused.userId);
      if (after.status !== 201) {
        problems.push(
          `${refused.userId}, past the door's trust, was answered ${after.status} ${String(after.body.code)}`,
        );
      }
      timeline('bought after the trust', `${refused.userId} asked again ${DOOR_TRUST_MS} ms later: ${after.status}`);
    }
    const { sale } = await sold(client, problems);
    if (sale.stockLeft !== 0) problems.push(`the sale ended with ${sale.stockLeft} left, not sold out`);
    return answers.outcome(
      stage,
      "door: a returned unit refused from the door's memory",
      sale,
      problems,
      `${n(stock)} units sold out through the door's route; ` +
        (refused
          ? `cycle ${refused.cycle} of at most ${MAX_CYCLES} (in ${n(lapsed)} before it the door's ${DOOR_TRUST_MS} ms had run out ` +
            `and Redis sold the unit again): l${refused.cycle} refused ` +
            `SOLD_OUT by Redis, order ${refused.orderId} cancelled, ${refused.userId} asked ${RETURN_GAP_MS} ms later and was ` +
            `refused SOLD_OUT at the door (MONITOR: Redis not asked) with the unit in stock; ${DOOR_TRUST_MS} ms later ` +
            `it bought that unit (${after?.status})`
          : `no refusal from the door's memory in ${n(MAX_CYCLES)} cycles`),
      {
        says: `falseRefusals: a unit returned within the door's trust (${DOOR_TRUST_MS} ms) refused SOLD_OUT at the door`,
        check: 'falseRefusals',
        shown: (report) => {
          const named = report.findings.filter((f) => f.check === 'falseRefusals').map((f) => f.userId);
          return refused && report.counts.falseRefusals === 1 && named[0] === refused.userId
            ? null
            : `history: the false refusals name ${named.join(', ') || 'no one'} (×${report.counts.falseRefusals}), ` +
                `not the buyer refused at the door alone (${refused?.userId ?? 'none'})`;
        },
      },
    );
  });
}
