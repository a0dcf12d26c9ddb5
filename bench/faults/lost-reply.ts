import { codesSeen, n, Outcome, Context, timeline, armed } from './kit';
import { NetworkStrategy, onNetworkStage, WRITE_MARKER, WRITE_NAME } from './network-stage';

/**
 * The reply to a write is lost after Redis applied it: the proxy passes the write
 * on, and on Redis's answer cuts the app's connection instead of delivering it. The
 * buyers of that write are told 503 OUTCOME_UNKNOWN (the client never resends a
 * command, so it is applied once), and their retries with the same Idempotency-Key
 * must get that order back.
 */
export function lostReply(ctx: Context, strategy: NetworkStrategy): Promise<Outcome> {
  const stock = ctx.quick ? 100 : 400;
  // A lock whose holder's connection was cut is freed by its TTL: keep it short.
  return onNetworkStage(ctx, strategy, { apps: 1, ttlMs: 1_000, stock }, async (stage) => {
    const [a] = stage.apps;
    const cut = armed(a.proxy.loseReplyTo(WRITE_MARKER[strategy]));
    // As many buyers as units: what a lost answer leaves unsold, a retry may still buy.
    const load = await stage.load(a, stock, 'b-');
    if (cut.fired())
      timeline(
        'reply lost',
        `Redis applied the first ${WRITE_NAME[strategy]}; its reply never reached the app, the connection cut: its buyers told ${codesSeen(load, ['OUTCOME_UNKNOWN'])}`,
        cut.at(),
      );
    const retries = await stage.retryUnknown();
    timeline(
      'retried with the same key',
      `${n(retries.retried)} OUTCOME_UNKNOWN buyers retried with their Idempotency-Key: ${n(retries.returned)} got the order written for them back, ${n(retries.afresh)} bought afresh`,
    );
    return stage.judge([load], retries, {
      name: `lost reply (${strategy})`,
      story: `the reply to the first write (${WRITE_NAME[strategy]}) lost after Redis applied it, the connection cut`,
      checks: [
        () => (cut.fired() ? null : 'the fault never fired: no write carried the marker'),
        () => (stage.count('OUTCOME_UNKNOWN') > 0 ? null : 'no buyer was told OUTCOME_UNKNOWN'),
        () =>
          retries.written > 0 ? null : `none of the ${n(retries.retried)} OUTCOME_UNKNOWN buyers had an order written`,
      ],
    });
  });
}
