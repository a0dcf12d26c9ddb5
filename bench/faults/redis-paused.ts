import { buyersAt, codesSeen, Context, n, onPrivateRedis, Outcome, timeline, verdict } from './kit';
import { saleUnderWay } from './sale-under-way';

/** Buyers sent while Redis is paused: each must hear LOCK_TIMEOUT at its own deadline. */
const PROBES = 5;

/**
 * CLIENT PAUSE longer than LOCK_WAIT_MS: waiting buyers get 503 LOCK_TIMEOUT on time.
 * Buyers of the load may all be inside the hold the pause stalls; the probes, sent
 * after the pause began, are certainly waiting, so the timeout is seen every time.
 */
export async function redisPaused(ctx: Context): Promise<Outcome> {
  return onPrivateRedis(async ({ redis, client, k, clock }) => {
    const waitMs = 500;
    // Longer than the wait budget, shorter than the client's 2 s command timeout: a
    // command already sent completes after the pause, so a buyer is never told 503
    // for an order that then lands.
    const pauseMs = 1_500;
    let stopWatching: () => void = () => undefined;
    try {
      const sale = await saleUnderWay(ctx, redis.url, client, k, { LOCK_WAIT_MS: String(waitMs) });
      stopWatching = sale.stopWatching;
      await client.call('CLIENT', 'PAUSE', String(pauseMs), 'ALL');
      const pausedAt = Date.now();
      timeline(
        'redis paused',
        `CLIENT PAUSE ${n(pauseMs)} ms ALL after ${n(sale.sold)} sold: every command waits; a buyer waits for the lock at most ${waitMs} ms`,
      );
      const probes = await buyersAt(sale.app.url, PROBES, PROBES, { userPrefix: 'probe-' });
      timeline(
        'waiting buyers timed out',
        `the ${PROBES} buyers sent during the pause told ${codesSeen(probes, ['LOCK_TIMEOUT'])}, each at its own deadline`,
      );
      const result = await sale.load;
      timeline(
        'redis resumed',
        `the pause over, commands run again; the sale's buyers told ${codesSeen(result, ['LOCK_TIMEOUT'])} in all`,
        pausedAt + pauseMs,
      );
      // Never a hang: a buyer waits its budget, or the pause for a command already sent
      // (with 3 s of slack: full-size runs on 2 busy cores answered in up to 2.9 s). A hang
      // would be unbounded.
      const v = await verdict(client, k, [result, probes], [], ['LOCK_TIMEOUT'], {
        maxAnswerMs: pauseMs + 3_000,
        history: { start: clock },
      });
      if ((probes.codes.LOCK_TIMEOUT ?? 0) !== PROBES)
        v.problems.push(`${codesSeen(probes, ['LOCK_TIMEOUT'])} of the ${PROBES} buyers sent during the pause`);
      if (v.unacknowledged !== 0) v.problems.push(`${v.unacknowledged} orders written for buyers told otherwise`);
      return {
        name: 'redis paused (lock)',
        ...v,
        story:
          `CLIENT PAUSE ${n(pauseMs)} ms ALL (LOCK_WAIT_MS ${waitMs}): ${codesSeen(v.load, ['LOCK_TIMEOUT'])} ` +
          `(all ${PROBES} buyers sent during the pause among them), slowest answer ${n(v.load.latency.max)} ms`,
      };
    } finally {
      stopWatching();
    }
  });
}
