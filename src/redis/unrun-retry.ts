import { setTimeout as sleep } from 'node:timers/promises';
import { type Cluster, ReplyError } from 'ioredis';

/**
 * Replies by which a cluster node says it did not run a command: the slot is served
 * elsewhere (MOVED), is moving and this key has left (ASK), a multi-key command's
 * keys are split by a move in progress (TRYAGAIN), or the cluster cannot serve the
 * slot right now (CLUSTERDOWN, during a failover). Nothing was applied, so sending
 * the command again is always safe, unlike a write whose reply never came.
 */
const NOT_RUN = /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN)\b/;

/** ioredis gave up following redirections: the last one is what the node said. */
const TOO_MANY = /^Too many Cluster redirections\. Last error: (?:ReplyError: )?(MOVED|ASK|TRYAGAIN|CLUSTERDOWN)\b/;

/**
 * How long one command may be sent again after "not run" replies: the command timeout
 * (COMMAND_TIMEOUT_MS), the longest any one command may take anyway. A slot move's
 * split lasts as long as its MIGRATEs; a graceful failover, a few hundred ms.
 */
export const NOT_RUN_BUDGET_MS = 2_000;

/** The redirection `err` is (MOVED, ASK, TRYAGAIN or CLUSTERDOWN), or null: the command did not run. */
export function notRun(err: unknown): string | null {
  if (!(err instanceof Error)) return null;
  if (err instanceof ReplyError) {
    const own = NOT_RUN.exec(err.message)?.[1];
    if (own) return own;
    // A MULTI whose queued command was redirected: EXEC aborted, nothing ran.
    if (!err.message.startsWith('EXECABORT')) return null;
    const previous = (err as { previousErrors?: Error[] }).previousErrors ?? [];
    const kinds = previous.map((e) => NOT_RUN.exec(e.message)?.[1] ?? null);
    return kinds.length > 0 && kinds.every(Boolean) ? kinds[0] : null;
  }
  return TOO_MANY.exec(err.message)?.[1] ?? null;
}

/** The wait before sending again after `kind`, full jitter: short for MOVED (the map is fixed at once), longer while a move or a failover is in progress. */
function pauseMs(kind: string, attempt: number): number {
  const base = kind === 'MOVED' ? 1 : kind === 'CLUSTERDOWN' ? 20 : 5;
  return Math.random() * Math.min(100, base * 2 ** attempt);
}

/**
 * Runs `send` until a node runs it: a "not run" answer (see notRun) is sent again, after
 * a jittered pause (and the slot map relearned after MOVED or CLUSTERDOWN), for up to
 * NOT_RUN_BUDGET_MS; any other outcome, including a command with no reply, is the
 * caller's, as it was.
 */
export async function untilRun<T>(cluster: Cluster, send: () => Promise<T>): Promise<T> {
  const deadline = performance.now() + NOT_RUN_BUDGET_MS;
  for (let attempt = 0; ; attempt++) {
    try {
      return await send();
    } catch (err) {
      const kind = notRun(err);
      const left = deadline - performance.now();
      if (!kind || left <= 0) throw err;
      if (kind === 'MOVED' || kind === 'CLUSTERDOWN') cluster.refreshSlotsCache();
      await sleep(Math.min(left, pauseMs(kind, attempt)));
    }
  }
}

/** Methods that are not one command to send again: a batch is replayed whole (see below); the rest are the connection's own. */
const NOT_RESENT = new Set([
  'multi',
  'pipeline',
  'exec',
  'discard',
  'watch',
  'unwatch',
  'quit',
  'subscribe',
  'ssubscribe',
]);

/**
 * The app's cluster client, with every command a node did not run sent again (untilRun).
 *
 * ioredis follows a MOVED or ASK itself for a command sent alone, and TRYAGAIN and
 * CLUSTERDOWN a bounded number of times (maxRedirections); but a command that went out
 * in an auto-pipelined batch whose replies differ gets the redirection as its answer,
 * and a slot split by a move for longer than those redirections last ends in "Too many
 * Cluster redirections". Either way the node ran nothing, and a buyer would have been
 * answered 503 while the sale could go on a few milliseconds later. Here each command
 * method sends its command again, and `multi()` and `pipeline()` record what is queued
 * and build the batch again for each EXEC: a MULTI whose queued command was redirected
 * was aborted whole (EXECABORT), a pipeline of reads can be read again.
 */
export function resendingNotRun(cluster: Cluster): Cluster {
  const commands = new Set(cluster.getBuiltinCommands());
  const methods = new Map<string, (...args: unknown[]) => unknown>();
  return new Proxy(cluster, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof prop !== 'string' || typeof value !== 'function') return value;
      let method = methods.get(prop);
      if (!method) {
        const fn = value as (...args: unknown[]) => unknown;
        if (prop === 'multi' || prop === 'pipeline') {
          method = (...args: unknown[]) => replayedBatch(target, prop, args);
        } else if (commands.has(prop) && !NOT_RESENT.has(prop)) {
          method = (...args: unknown[]) => untilRun(target, () => fn.apply(target, args) as Promise<unknown>);
        } else {
          method = fn.bind(target);
        }
        methods.set(prop, method);
      }
      return method;
    },
  });
}

type Batch = Record<string, (...args: unknown[]) => unknown> & { exec(): Promise<[Error | null, unknown][] | null> };

/**
 * A stand-in for `cluster.multi()` / `cluster.pipeline()`: queued calls are recorded,
 * and each EXEC builds the batch afresh and sends it, again while a node ran none of it
 * (a redirection in the replies or the EXEC's rejection).
 */
function replayedBatch(cluster: Cluster, kind: 'multi' | 'pipeline', args: unknown[]): Batch {
  const queued: [string, unknown[]][] = [];
  const send = async () => {
    const batch = (cluster[kind] as unknown as (...a: unknown[]) => Batch).apply(cluster, args);
    for (const [name, callArgs] of queued) batch[name](...callArgs);
    const replies = await batch.exec();
    const redirected = replies?.find(([err]) => notRun(err) !== null);
    if (redirected) throw redirected[0];
    return replies;
  };
  const recorder: Batch = new Proxy({} as Batch, {
    get(_, prop) {
      if (prop === 'exec') return () => untilRun(cluster, send);
      if (prop === 'length') return queued.length;
      if (typeof prop !== 'string' || prop === 'then') return undefined;
      return (...callArgs: unknown[]) => {
        queued.push([prop, callArgs]);
        return recorder;
      };
    },
  });
  return recorder;
}
