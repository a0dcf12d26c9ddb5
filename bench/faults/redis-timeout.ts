import { COMMAND_TIMEOUT_MS } from '../../src/redis/create-client';
import { Context, n, Outcome, waitUntil, armed } from './kit';
import { NetworkStrategy, onNetworkStage, WRITE_MARKER, WRITE_NAME } from './network-stage';

/** A cap on the pause, should the scenario fail before it unpauses. */
const PAUSE_CAP_MS = 30_000;

/**
 * Redis paused past the command timeout just before a write: the proxy holds the
 * write until Redis is paused (`CLIENT PAUSE ... WRITE`), then delivers it, and
 * Redis keeps it waiting. The app's command times out and the write's buyers are
 * told OUTCOME_UNKNOWN; only then does the suite unpause Redis, which runs the write:
 * a 503 for an order that was written, which only a retry with the same
 * Idempotency-Key can find.
 */
export function redisTimeout(ctx: Context, strategy: NetworkStrategy): Promise<Outcome> {
  const stock = ctx.quick ? 100 : 400;
  return onNetworkStage(ctx, strategy, { apps: 1, ttlMs: 1_000, stock }, async (stage) => {
    const { client } = stage;
    const [a] = stage.apps;
    const held = armed(a.proxy.holdRequest(WRITE_MARKER[strategy]));
    const loading = stage.load(a, stock, 'b-');
    await waitUntil('a write to be held', async () => held.fired());
    await client.call('CLIENT', 'PAUSE', String(PAUSE_CAP_MS), 'WRITE');
    const pausedAt = Date.now();
    a.proxy.release();
    try {
      await waitUntil(
        'the app to answer OUTCOME_UNKNOWN (its command timed out)',
        async () => stage.count('OUTCOME_UNKNOWN') > 0,
      );
    } finally {
      await client.call('CLIENT', 'UNPAUSE');
    }
    const pauseMs = Date.now() - pausedAt;
    await a.proxy.idle();
    const load = await loading;
    const retries = await stage.retryUnknown();
    return stage.judge([load], retries, {
      name: `timeout before a write (${strategy})`,
      story:
        `CLIENT PAUSE WRITE for ${n(pauseMs)} ms with the first write (${WRITE_NAME[strategy]}) delivered into it ` +
        `(command timeout ${n(COMMAND_TIMEOUT_MS)} ms); unpaused once its buyers were told OUTCOME_UNKNOWN, and Redis ran it`,
      checks: [
        () => (retries.written > 0 ? null : 'no OUTCOME_UNKNOWN buyer had an order: the write did not run late'),
      ],
    });
  });
}
