import { COMMAND_TIMEOUT_MS } from '../../src/redis/create-client';
import { readSale } from '../verdict';
import { codesSeen, Context, n, Outcome, timeline, waitUntil, armed } from './kit';
import { ACQUIRE_MARKER, ACQUIRE_NAME, NetworkStrategy, onNetworkStage, takesLock } from './network-stage';

/** A lock an orphaning SET NX would leave: far longer than a buyer's wait, so the next buyers would all time out. */
const TTL_MS = 10_000;
/** Buyers of the first wave, whose acquisition is delayed. */
const WAVE_1 = 20;

/**
 * The request that takes the lock (SET NX, or the fenced-acquire script) is held in
 * the network past the command timeout: the acquisition fails without a reply and
 * its buyers are answered. Then it is delivered and runs, setting a lock nobody
 * holds, and the compare-and-delete the app sent behind it on the same connection
 * frees it. A second wave of buyers must then sell out without waiting for that
 * lock's TTL. `atomic` and `optimistic` take no lock: their first request of a
 * purchase (the script, WATCH) is delayed instead.
 */
export function setNxDelayed(ctx: Context, strategy: NetworkStrategy): Promise<Outcome> {
  const stock = ctx.quick ? 100 : 400;
  return onNetworkStage(ctx, strategy, { apps: 1, ttlMs: TTL_MS, stock }, async (stage) => {
    const { client, k } = stage;
    const [a] = stage.apps;
    const held = armed(a.proxy.holdRequest(ACQUIRE_MARKER[strategy]));
    const wave1Loading = stage.load(a, WAVE_1, 'w1-');
    await waitUntil('the acquisition to be held', async () => held.fired());
    timeline(
      takesLock(strategy) ? 'lock request held in the network' : 'first request held in the network',
      `the first ${ACQUIRE_NAME[strategy]} held in the app's proxy`,
    );
    // Every buyer of the first wave answered: the held request timed out.
    const wave1 = await wave1Loading;
    const heldMs = Date.now() - held.at();
    timeline(
      'first wave answered',
      `the held request timed out (command timeout ${n(COMMAND_TIMEOUT_MS)} ms): its ${WAVE_1} buyers told ${codesSeen(wave1, Object.keys(wave1.codes))}`,
    );
    a.proxy.release();
    await a.proxy.idle();
    const ranAt = Date.now();
    const lockAfter = await client.get(k.lock);
    timeline(
      'held request delivered',
      `it ran late` +
        (takesLock(strategy)
          ? `: lock key right after: ${lockAfter === null ? 'free (the release the app sent behind it freed it)' : `held, nobody's (TTL ${n(TTL_MS)} ms)`}`
          : ''),
    );
    // Enough buyers to sell out whatever the first wave left.
    const wave2 = await stage.load(a, stock, 'w2-');
    const firstSale = (await readSale(client, k)).orders.find((o) => o.userId.startsWith('w2-'));
    const gapMs = firstSale ? firstSale.ms - ranAt : null;
    if (firstSale)
      timeline(
        'second wave sold',
        `its first order ${n(gapMs!)} ms after, without waiting out a lock; ${n(wave2.status['201'] ?? 0)} sold in all`,
        firstSale.ms,
      );
    const retries = await stage.retryUnknown();
    const name = takesLock(strategy) ? strategy : `${strategy}, no lock to take`;
    return stage.judge([wave1, wave2], retries, {
      name: `SET NX delayed (${name})`,
      soldOut: true,
      story:
        `the first ${ACQUIRE_NAME[strategy]} held in the network for ${n(heldMs)} ms (command timeout ${n(COMMAND_TIMEOUT_MS)} ms), ` +
        `its wave of ${WAVE_1} buyers told ${codesSeen(wave1, Object.keys(wave1.codes))}; then delivered and run` +
        (takesLock(strategy)
          ? `: lock key right after: ${lockAfter === null ? 'free' : 'held'} (TTL ${n(TTL_MS)} ms)`
          : '') +
        `; a second wave sold ${n(wave2.status['201'] ?? 0)}, its first order ${gapMs === null ? 'never' : `${n(gapMs)} ms`} after, ` +
        codesSeen(wave2, ['LOCK_TIMEOUT']),
      checks: [
        () => (takesLock(strategy) && lockAfter !== null ? 'the delayed acquisition left a lock nobody holds' : null),
        () =>
          (wave2.codes.LOCK_TIMEOUT ?? 0) === 0
            ? null
            : `the second wave waited out a lock: ${codesSeen(wave2, ['LOCK_TIMEOUT'])}`,
        () =>
          gapMs !== null && gapMs < TTL_MS ? null : "the second wave's first order came only after the lock's TTL",
      ],
    });
  });
}
