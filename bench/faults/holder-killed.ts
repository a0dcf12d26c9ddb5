import { answered, Context, holderPid, n, onHolderStage, Outcome, timeline, verdict, waitForStop } from './kit';

/** The victim stops itself at this hold that reaches its write: it has sold for two holds before. */
const STOP_AT_WRITE = 3;

/**
 * SIGKILL the app holding the lock: the other app waits out the TTL, then sells on.
 *
 * The victim sells alone until its fault hook stops it (SIGSTOP) holding the lock,
 * at its third write; it is killed there, and only then does the other app's load
 * begin. So the holder is caught every time, not when polling happens to see it.
 */
export function holderKilled(ctx: Context): Promise<Outcome> {
  return onHolderStage(
    ctx,
    'lock',
    1_500,
    STOP_AT_WRITE,
    async ({ size, client, k, stopper: victim, other, clock, load }) => {
      const stop = new AbortController();
      const victimLoad = load(victim, 'a0-', stop.signal);
      await waitForStop(victim, `the victim to stop at its write ${STOP_AT_WRITE}`);
      const holder = await holderPid(client, k);
      const pttl = await client.pttl(k.lock);
      const soldBefore = size.stock - Number(await client.get(k.stock));
      timeline(
        'holder paused',
        `pid ${victim.pid} stopped itself (SIGSTOP) holding the lock at its write ${STOP_AT_WRITE}, after selling ${n(soldBefore)}`,
      );
      process.kill(victim.pid, 'SIGKILL');
      const killedAt = Date.now();
      timeline('holder killed', `SIGKILL pid ${victim.pid}: its lock stays in Redis for its TTL, ${n(pttl)} ms left`);
      stop.abort();
      const [killed, survived] = await Promise.all([victimLoad, load(other, 'a1-')]);
      const after = (await client.xrange(k.orders, `${killedAt}`, '+', 'COUNT', 1))[0];
      const gap = after ? Number(after[0].split('-')[0]) - killedAt : null;
      if (gap !== null)
        timeline(
          'other holder took the lock',
          `pid ${other.pid} sold its first unit ${n(gap)} ms after the kill, once the dead holder's lock had expired`,
          killedAt + gap,
        );
      const v = await verdict(client, k, [survived], [killed], [], { history: { start: clock } });
      if (holder !== victim.pid)
        v.problems.push(`the lock was held by pid ${holder}, not by the stopped victim ${victim.pid}`);
      if (gap === null) v.problems.push('nothing was sold after the kill');
      else if (gap < pttl - 50)
        v.problems.push(`a sale ${gap} ms after the kill, while the dead holder's lock still had ${pttl} ms`);
      return {
        name: 'holder killed (lock, 2 apps)',
        ...v,
        story:
          `pid ${victim.pid} stopped itself holding the lock at its write ${STOP_AT_WRITE}, after selling ${n(soldBefore)}; ` +
          `SIGKILL with the lock's TTL at ${n(pttl)} ms; next sale ${gap === null ? 'never' : `${n(gap)} ms`} later, by the other app; ` +
          `the killed app had answered ${n(answered(killed))} (${n(killed.status['201'] ?? 0)} × 201) and wrote ${v.unacknowledged} orders it never acknowledged`,
      };
    },
  );
}
