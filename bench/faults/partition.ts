import { COMMAND_TIMEOUT_MS } from '../../src/redis/create-client';
import { codesSeen, Context, lateWrite, n, Outcome, timeline } from './kit';
import { holdFirstWriteOfA, NetworkStrategy, onNetworkStage, takesLock, WRITE_NAME } from './network-stage';

const TTL_MS = 500;
/** App A's buyers: its first write is the one cut off; the rest only wait. */
const A_BUYERS = 10;

/**
 * App A is partitioned from Redis while it holds the lock, its write sent and not
 * arrived (the proxy holds it and everything A's connection sends after it), for
 * longer than the lock's TTL and the command timeout. App B, on its own proxy, takes
 * the lock once the TTL has run out and sells the stock out. Once B's buyers and A's
 * (its write's buyers told OUTCOME_UNKNOWN) are all answered, the partition heals
 * and what A sent arrives, late, as TCP delivers it. Under plain `lock` nothing in
 * Redis checks that write and it oversells (the lesson); the others write nothing.
 */
export function partition(ctx: Context, strategy: NetworkStrategy): Promise<Outcome> {
  const stock = ctx.quick ? 50 : 200;
  return onNetworkStage(ctx, strategy, { apps: 2, ttlMs: TTL_MS, stock }, async (stage) => {
    const { client, k } = stage;
    const {
      a,
      b,
      held,
      aLoading,
      stockAtHold: stockAtCut,
      heldByA,
    } = await holdFirstWriteOfA(stage, strategy, A_BUYERS);
    // B sells while A is cut off (under a lock, once A's TTL has run out), then A's
    // buyers are all answered, the held write's by the command timeout.
    const bLoad = await stage.load(b, 2 * stock, 'b-');
    const aLoad = await aLoading;
    const soldWhileCut = stockAtCut - Number(await client.get(k.stock));
    const cutMs = Date.now() - held.at();
    timeline(
      takesLock(strategy) ? 'other holder took the lock' : 'app B sold',
      `app B (pid ${b.app.pid}) sold ${n(soldWhileCut)} units while A was cut off` +
        (takesLock(strategy) ? `, once A's lock had expired (TTL ${TTL_MS} ms)` : '') +
        `; A's buyers told ${codesSeen(aLoad, Object.keys(aLoad.codes))}`,
    );
    a.proxy.release();
    await a.proxy.idle();
    const healedAt = Date.now();
    timeline('partition healed', `after ${n(cutMs)} ms: what A sent arrives at Redis, late`);
    const retries = await stage.retryUnknown();
    const lesson = strategy === 'lock';
    const outcome = await stage.judge([aLoad, bLoad], retries, {
      name: `partition (${strategy}, 2 apps)`,
      oversellIsTheLesson: lesson,
      story:
        `app A (pid ${a.app.pid}) cut off from Redis for ${n(cutMs)} ms (command timeout ${n(COMMAND_TIMEOUT_MS)} ms) ` +
        `with its write (${WRITE_NAME[strategy]}) in the network` +
        (takesLock(strategy) ? `, holding the lock (TTL ${TTL_MS} ms)` : '') +
        `; app B (pid ${b.app.pid}) sold ${n(soldWhileCut)} units meanwhile; A's buyers were told ` +
        `${codesSeen(aLoad, Object.keys(aLoad.codes))}; healed, A's late write ` +
        (lesson ? 'went through after B had sold out: the failure fencing prevents' : 'wrote nothing'),
      checks: [
        heldByA('cut-off'),
        () => (soldWhileCut > 0 ? null : 'app B sold nothing while A was cut off'),
        () => (stage.count('OUTCOME_UNKNOWN', a) > 0 ? null : "no buyer of A's held write was told OUTCOME_UNKNOWN"),
        () => (lesson || retries.written === 0 ? null : `A's late write placed ${retries.written} orders`),
      ],
    });
    lateWrite(outcome, healedAt);
    return outcome;
  });
}
