import { health } from '../../harness/http';
import {
  codesSeen,
  Context,
  holderPid,
  lateWriteNamed,
  n,
  onHolderStage,
  Outcome,
  timeline,
  verdict,
  waitForStop,
} from './kit';

/** The paused app stops itself at this hold that reaches its write: it has sold for one hold before. */
const STOP_AT_WRITE = 2;
const TTL_MS = 400;

/**
 * A holder paused past its TTL right after its validity check, while another app
 * takes the lock and sells the product out; then it resumes and writes.
 *
 * Its fault hook stops it (SIGSTOP) at exactly that point, and it is resumed
 * (SIGCONT) only once the other app has sold out: so the late write lands after the
 * other holder's every time. Under `lock` it oversells (the lesson: nothing in Redis
 * checks the write); under `fenced` the fence refuses it and nothing is written.
 */
export function holderPaused(ctx: Context, strategy: 'lock' | 'fenced'): Promise<Outcome> {
  return onHolderStage(
    ctx,
    strategy,
    TTL_MS,
    STOP_AT_WRITE,
    async ({ client, k, stopper: paused, other, clock, load }) => {
      const pausedLoad = load(paused, 'p-');
      await waitForStop(paused, `the holder to stop at its write ${STOP_AT_WRITE}`);
      const stoppedAt = Date.now();
      const holder = await holderPid(client, k);
      const stockAtStop = Number(await client.get(k.stock));
      timeline(
        'holder paused',
        `pid ${paused.pid} stopped itself (SIGSTOP) holding the lock at its write ${STOP_AT_WRITE}, its validity checked; ${n(stockAtStop)} units left`,
      );
      // The other app waits out the paused holder's TTL, takes the lock and sells every unit left.
      const otherResult = await load(other, 'o-');
      const soldInPause = stockAtStop - Number(await client.get(k.stock));
      const pauseMs = Date.now() - stoppedAt;
      timeline(
        'other holder took the lock',
        `pid ${other.pid} waited out the ${TTL_MS} ms TTL, took the lock and sold ${n(soldInPause)} units while pid ${paused.pid} slept`,
      );
      process.kill(paused.pid, 'SIGCONT');
      timeline(
        'holder resumed',
        `SIGCONT: pid ${paused.pid} goes on from its write, still believing it holds the lock`,
      );
      const pausedResult = await pausedLoad;
      const refused = pausedResult.codes.STALE_LOCK ?? 0;
      timeline(
        refused > 0 ? 'late write refused' : 'late write applied',
        refused > 0
          ? `the fence refused it: ${codesSeen(pausedResult, ['STALE_LOCK'])}, nothing written`
          : `nothing in Redis checked it: stock now ${await client.get(k.stock)}`,
      );
      const lost = (await health(paused.url)).lostLocks ?? 0;
      // Plain `lock` has no defence against a late write: its oversell is the lesson of
      // this scenario, reported below (and required: a lesson that did not happen proves nothing).
      const v = await verdict(client, k, [pausedResult, otherResult], [], ['LOCK_TIMEOUT', 'STALE_LOCK'], {
        oversellIsTheLesson: strategy === 'lock',
        history: { start: clock },
      });
      if (holder !== paused.pid)
        v.problems.push(`the lock was held by pid ${holder}, not by the stopped app ${paused.pid}`);
      if (soldInPause === 0) v.problems.push('the other app sold nothing while the holder was paused');
      if (lost === 0) v.problems.push('the paused app never noticed it had lost the lock');
      if (strategy === 'lock' && v.oversold === 0)
        v.problems.push('the late write did not oversell: the lesson was not shown');
      // The history names it: the first order held above the stock is the paused holder's
      // late write. Not a write outside its request: its buyers are answered 201 after it.
      if (strategy === 'lock' && !lateWriteNamed(v.report, 'p-'))
        v.problems.push("the history's oversell does not name the paused holder's late write");
      if (strategy === 'fenced' && !pausedResult.codes.STALE_LOCK) v.problems.push('the fence refused nothing');
      const late =
        strategy === 'fenced'
          ? `its late write was refused by the fence (${codesSeen(pausedResult, ['STALE_LOCK'])}): nothing written`
          : `its late write went through after the other holder's: OVERSOLD ${n(v.oversold)}, the failure fencing prevents`;
      return {
        name: `holder paused (${strategy}, 2 apps)`,
        ...v,
        story:
          `pid ${paused.pid} stopped itself holding the lock at its write ${STOP_AT_WRITE}, its validity checked (TTL ${TTL_MS} ms); ` +
          `two holders: pid ${other.pid} took the lock and sold ${n(soldInPause)} units while it slept ${n(pauseMs)} ms; ` +
          `after SIGCONT the paused app counted ${lost} lost hold(s): ${late}`,
      };
    },
  );
}
