import { COMMAND_TIMEOUT_MS } from '../../src/redis/create-client';
import { codesSeen, Context, lateWrite, lateWriteNamed, n, Outcome, timeline, waitUntil } from './kit';
import { holdFirstWriteOfA, NetworkStrategy, onNetworkStage, takesLock, WRITE_NAME } from './network-stage';

const TTL_MS = 500;
/** App A's buyers: its first write is the one delayed; the rest only wait. */
const A_BUYERS = 10;

/**
 * App A's write is held in the network past the lock's TTL, but not past the
 * command timeout: the proxy holds it (and what A's connection sends after it) until
 * app B, on its own proxy, has taken the lock and sold every unit left, then
 * delivers it. A hears Redis's real answer to its late write. Under plain `lock` it
 * is applied and acknowledged, an oversold order (the lesson); `fenced` refuses it
 * (STALE_LOCK), `atomic`'s script finds the stock gone, `optimistic`'s EXEC finds a
 * WATCHed key changed: nothing written.
 */
export function delayedWrite(ctx: Context, strategy: NetworkStrategy): Promise<Outcome> {
  const stock = ctx.quick ? 50 : 200;
  return onNetworkStage(ctx, strategy, { apps: 2, ttlMs: TTL_MS, stock }, async (stage) => {
    const { client, k } = stage;
    const { a, b, held, aLoading, stockAtHold, heldByA } = await holdFirstWriteOfA(stage, strategy, A_BUYERS);
    const bLoading = stage.load(b, 2 * stock, 'b-');
    await waitUntil('app B to sell every unit left', async () => Number(await client.get(k.stock)) <= 0);
    const delayMs = Date.now() - held.at();
    timeline(
      takesLock(strategy) ? 'other holder took the lock' : 'app B sold out',
      `app B (pid ${b.app.pid}) sold the ${n(stockAtHold)} units left while A's write waited` +
        (takesLock(strategy) ? `, once A's lock had expired (TTL ${TTL_MS} ms)` : ''),
    );
    a.proxy.release();
    await a.proxy.idle();
    const deliveredAt = Date.now();
    timeline('late write delivered', `after ${n(delayMs)} ms in the network, A's write reaches Redis`);
    const [aLoad, bLoad] = await Promise.all([aLoading, bLoading]);
    const retries = await stage.retryUnknown();
    const lesson = strategy === 'lock';
    const timedOut = stage.count('OUTCOME_UNKNOWN', a) > 0;
    const outcome = await stage.judge([aLoad, bLoad], retries, {
      name: `delayed write (${strategy}, 2 apps)`,
      oversellIsTheLesson: lesson,
      story:
        `app A's (pid ${a.app.pid}) first write (${WRITE_NAME[strategy]}) held in the network for ${n(delayMs)} ms` +
        (takesLock(strategy) ? `, past the lock's TTL (${TTL_MS} ms)` : '') +
        `, while app B (pid ${b.app.pid}) sold the ${n(stockAtHold)} units left; delivered: A's buyers were told ` +
        `${codesSeen(aLoad, Object.keys(aLoad.codes))}` +
        (timedOut ? ` (past the command timeout of ${n(COMMAND_TIMEOUT_MS)} ms)` : '') +
        (lesson
          ? '; the late write went through after B had sold out: the failure fencing prevents'
          : '; nothing of it written'),
      checks: [
        heldByA('delayed'),
        () => (stockAtHold > 0 ? null : 'nothing was left for app B to sell'),
        () => (lesson || retries.written === 0 ? null : `A's late write placed ${retries.written} orders`),
        // The history names it: the first order held above the stock is A's late write.
        (v) =>
          !lesson || lateWriteNamed(v.report, 'a-') ? null : "the history's oversell does not name A's late write",
      ],
    });
    lateWrite(outcome, deliveredAt);
    return outcome;
  });
}
