import { COMMAND_TIMEOUT_MS } from '../../src/redis/create-client';
import { Context, n, Outcome, waitUntil, armed } from './kit';
import { NetworkStrategy, onNetworkStage, WRITE_MARKER, WRITE_NAME } from './network-stage';

/**
 * A write that never arrives: the proxy holds it, and everything its connection
 * sends after it, so Redis is out of the app's reach; once the app's command timeout
 * has answered the write's buyers (OUTCOME_UNKNOWN), the proxy throws the held bytes
 * away and cuts the connection. The app reconnects and sells on; nothing of the
 * dropped write is in Redis, and a retry with the same key buys once.
 */
export function redisUnreachable(ctx: Context, strategy: NetworkStrategy): Promise<Outcome> {
  const stock = ctx.quick ? 100 : 400;
  return onNetworkStage(ctx, strategy, { apps: 1, ttlMs: 1_000, stock }, async (stage) => {
    const [a] = stage.apps;
    const held = armed(a.proxy.holdRequest(WRITE_MARKER[strategy]));
    // As many buyers as units: the units the dropped write would have sold stay for its retries.
    const loading = stage.load(a, stock, 'b-');
    await waitUntil('a write to be held', async () => held.fired());
    await waitUntil(
      'the app to answer OUTCOME_UNKNOWN (its command timed out)',
      async () => stage.count('OUTCOME_UNKNOWN') > 0,
    );
    const outageMs = Date.now() - held.at();
    a.proxy.drop();
    const load = await loading;
    const retries = await stage.retryUnknown();
    return stage.judge([load], retries, {
      name: `Redis unreachable (${strategy})`,
      story:
        `the first write (${WRITE_NAME[strategy]}), and all its connection sent after it, held until its buyers were ` +
        `told OUTCOME_UNKNOWN, ${n(outageMs)} ms (command timeout ${n(COMMAND_TIMEOUT_MS)} ms), then dropped and the connection cut`,
      checks: [
        () =>
          retries.retried > retries.written
            ? null
            : 'every OUTCOME_UNKNOWN buyer had an order: the dropped write was not among them',
      ],
    });
  });
}
