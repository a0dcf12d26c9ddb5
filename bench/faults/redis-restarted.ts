import { health, waitForHealth } from '../../harness/http';
import { startPrivateRedis } from '../../harness/redis';
import {
  buyersAt,
  codesSeen,
  Context,
  n,
  Outcome,
  timeline,
  verdict,
  waitUntil,
  noAofRewrite,
  onPrivateRedis,
} from './kit';
import { saleUnderWay } from './sale-under-way';

/** What a buyer may be told because of the outage: nothing written, a lock left behind, or a write cut mid-flight. */
const OUTAGE_CODES = ['REDIS_UNAVAILABLE', 'LOCK_TIMEOUT', 'OUTCOME_UNKNOWN'];

/** Answers the buyers get while Redis is down, before it is started again. */
const ANSWERS_DURING_OUTAGE = 200;

/**
 * SIGTERM the Redis mid-sale, start it again on the same AOF folder.
 *
 * The outage lasts until buyers have been answered during it (not a fixed time, which
 * on a fast machine could use up all the demand), and the sale is finished by a second
 * wave of buyers once the app is healthy again, so "sold out" is a promise it can keep.
 */
export async function redisRestarted(ctx: Context): Promise<Outcome> {
  return onPrivateRedis(
    async ({ redis, client, k, clock }) => {
      let stopWatching: () => void = () => undefined;
      try {
        // A fresh Redis with AOF on writes its first AOF in the background, and refuses a
        // SIGTERM until that is done: the sale would go on, and could sell out, while Redis
        // is being stopped. So the outage starts only once no rewrite is in progress.
        await noAofRewrite(client);
        // The app stops itself before its 5th hold's write: mid-sale by construction. (Waiting
        // for a quarter of the stock by polling was not: CI once saw the rest, 1,100 units,
        // sell in the 48 ms before the outage began, leaving nothing to sell after it.)
        const sale = await saleUnderWay(ctx, redis.url, client, k, {}, 5);
        stopWatching = sale.stopWatching;
        // Writes stop now, not when the process has exited: a SIGTERMed Redis serves on until
        // its AOF is flushed. CLIENT PAUSE WRITE holds every write from here on; the pause
        // dies with the process. Then the app goes on, from its write, into the outage.
        await client.call('CLIENT', 'PAUSE', '60000', 'WRITE');
        const stopAt = Date.now();
        await redis.stop();
        process.kill(sale.app.pid, 'SIGCONT');
        const downAt = Date.now();
        timeline(
          'redis stopped',
          `SIGTERM after ${n(sale.sold)} sold, writes paused first: buyers now hear REDIS_UNAVAILABLE`,
        );
        const before = sale.progress.done;
        await waitUntil(
          `${ANSWERS_DURING_OUTAGE} answers during the outage`,
          async () => sale.progress.done >= before + ANSWERS_DURING_OUTAGE,
        );
        // Tracked: stopAll stops it.
        await startPrivateRedis({ appendonly: true, port: redis.port, dir: redis.dir });
        const downMs = Date.now() - downAt;
        timeline(
          'redis restarted',
          `on the same AOF, down ${n(downMs)} ms (${n(ANSWERS_DURING_OUTAGE)} answers during the outage)`,
        );
        // Right after the restart: a lock key here is a hold cut by the outage (its key is
        // in the AOF and lives on until its TTL) or one the app took already; either way
        // buyers wait for it at most LOCK_WAIT_MS.
        const [lockAfter, soldAtRestart] = await Promise.all([client.pttl(k.lock), client.xlen(k.orders)]);
        const first = await sale.load;
        await waitForHealth(sale.app.url);
        timeline(
          'app reconnected',
          `the app healthy again without a restart of its own; lock key: ${lockAfter > 0 ? `held, PTTL ${n(lockAfter)} ms` : lockAfter === -1 ? 'held WITHOUT A TTL' : 'free'}; a second wave buys`,
        );
        const second = await buyersAt(
          sale.app.url,
          sale.size.stock * 2,
          sale.size.connections,
          { userPrefix: 'after-' },
          sale.progress,
        );
        // Never a hang: a buyer waits at most its budget (LOCK_WAIT_MS, 5 s by default) for a
        // lock the outage left behind, plus a command's timeout (2 s); the rest is slack for
        // two busy cores (5.5 s was seen). A hang would be the TTL or forever.
        // A write in flight when Redis went down may or may not have been applied: its buyer
        // is told OUTCOME_UNKNOWN (the verdict reports such orders as unacknowledged).
        const v = await verdict(client, k, [first, second], [], OUTAGE_CODES, {
          maxAnswerMs: 9_000,
          // Redis's clock read at the start and again after the restart: one host's clock.
          history: { start: clock },
        });
        // A lock without a TTL would block the product forever: the failure the demo teaches.
        if (lockAfter === -1) v.problems.push('the lock key has no TTL after the restart');
        const soldAfter = (await client.xlen(k.orders)) - soldAtRestart;
        if (soldAfter === 0) v.problems.push('nothing was sold after the restart');
        if ((first.codes.REDIS_UNAVAILABLE ?? 0) === 0)
          v.problems.push('no buyer saw the outage (no REDIS_UNAVAILABLE)');
        const served = (await health(sale.app.url)).http;
        if (served !== 200) v.problems.push(`/health answers ${served} after the restart`);
        return {
          name: 'redis restarted (lock)',
          ...v,
          story:
            `SIGTERM Redis after ${n(sale.sold)} sold (it exited ${n(downAt - stopAt)} ms later), down ${n(downMs)} ms, restarted on the same AOF: ${codesSeen(first, OUTAGE_CODES)}, ` +
            `slowest answer ${n(v.load.latency.max)} ms; lock key right after the restart: ${lockAfter > 0 ? `held, PTTL ${n(lockAfter)} ms` : lockAfter === -1 ? 'held WITHOUT A TTL' : 'free'}; ` +
            `the app sold on without a restart of its own (${n(soldAfter)} orders after the restart, ${n(second.status['201'] ?? 0)} of them to a second wave)`,
        };
      } finally {
        stopWatching();
      }
    },
    { appendonly: true },
  );
}
