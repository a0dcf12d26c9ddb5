import { AsyncLocalStorage } from 'node:async_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import calculateSlot from 'cluster-key-slot';
import { type Cluster, Command, type Redis, ReplyError } from 'ioredis';

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

/** performance.now() past which nothing is sent again, set by the caller's context (resendingUntil). */
const until = new AsyncLocalStorage<number>();

/**
 * Runs `fn` with no command of it sent again after `deadline` (performance.now()): a
 * lock's section passes its lease's validity, so that a write the cluster redirected is
 * not sent again after the lock may have expired (which would widen the late write a
 * plain lock cannot prevent).
 */
export function resendingUntil<T>(deadline: number, fn: () => Promise<T>): Promise<T> {
  return until.run(Math.min(deadline, until.getStore() ?? Infinity), fn);
}

/**
 * ioredis' own refusal to send a command to a node whose connection is not up: the
 * cluster client has no offline queue, and the node is still connecting (the master a
 * MOVED names after a failover, just learned of; or a node that is gone, being dialled
 * again). Nothing was written, but the message is the one a connection closing under a
 * sent command gives, so only where it was raised tells them apart: ioredis'
 * tryConnection, which picks the node and sends. untilRun() sends it again only once a
 * connection comes up.
 */
function refusedUnsent(err: Error): boolean {
  // The first frame: ioredis' own. Exact only while retryDelayOnFailover is 0 (create-client.ts):
  // else a sent command whose connection closed would come back through tryConnection.
  return (
    err.message === 'Connection is closed.' &&
    /^Error: Connection is closed\.\n\s*at tryConnection \(/.test(err.stack ?? '')
  );
}

/**
 * Why the cluster did not run `err`'s command: its redirection (MOVED, ASK, TRYAGAIN or
 * CLUSTERDOWN), or UNSENT (refusedUnsent); null when it may have run.
 */
export function notRun(err: unknown): string | null {
  if (!(err instanceof Error)) return null;
  if (refusedUnsent(err)) return 'UNSENT';
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
 * a jittered pause, for up to NOT_RUN_BUDGET_MS or the caller's resendingUntil deadline,
 * whichever comes first; after MOVED or CLUSTERDOWN, once the slot map has been
 * relearned (sent again on the old map, it would go back to the node that said MOVED,
 * which the refresh may drop under it: "Connection is closed", an unknown outcome for
 * a command that never ran). Any other outcome, including a command with no reply, is
 * the caller's, as it was.
 */
export async function untilRun<T>(
  cluster: Cluster,
  send: () => Promise<T>,
  /** The slot the command's keys are in (slotOf()), for an UNSENT refusal; none: refused at once. */
  slot?: () => number | undefined,
): Promise<T> {
  const deadline = Math.min(performance.now() + NOT_RUN_BUDGET_MS, until.getStore() ?? Infinity);
  for (let attempt = 0; ; attempt++) {
    try {
      return await send();
    } catch (err) {
      const kind = notRun(err);
      if (!kind || performance.now() >= deadline) throw err;
      if (kind === 'UNSENT') {
        // Sent again once the connection to its slot's node, being opened, is up; refused
        // at once if it is not being opened or closes (a node that is gone refuses it).
        if (!(await opened(cluster, slot?.(), deadline - performance.now()))) throw err;
        continue;
      }
      if (kind === 'MOVED' || kind === 'CLUSTERDOWN') await relearned(cluster, deadline - performance.now());
      const left = deadline - performance.now();
      if (left <= 0) throw err;
      await sleep(Math.min(left, pauseMs(kind, attempt)));
    }
  }
}

/** The slot of a command's first key (ioredis' key specs), or undefined for a command without keys. */
export function slotOf(name: string, args: unknown[]): number | undefined {
  const [key] = new Command(name, args as string[]).getKeys();
  return key === undefined ? undefined : calculateSlot(key);
}

/** Per connection being opened: true once it is up, false once it closed (one pair of listeners each, however many wait). */
const opening = new WeakMap<Redis, Promise<boolean>>();

/**
 * Resolves true once `cluster`'s connection to the master of `slot`, being opened, is
 * up; false at once if there is none or it is not being opened, once it closes, or after
 * `waitMs`.
 */
function opened(cluster: Cluster, slot: number | undefined, waitMs: number): Promise<boolean> {
  const key = slot === undefined ? undefined : cluster.slots[slot]?.[0];
  const node = key === undefined ? undefined : nodeByKey(cluster, key);
  if (!node || (node.status !== 'connecting' && node.status !== 'connect')) return Promise.resolve(false);
  let up = opening.get(node);
  if (!up) {
    up = new Promise<boolean>((resolve) => {
      const done = (ready: boolean) => {
        node.off('ready', onReady).off('end', onEnd);
        opening.delete(node);
        resolve(ready);
      };
      const onReady = () => done(true);
      const onEnd = () => done(false);
      node.once('ready', onReady).once('end', onEnd);
    });
    opening.set(node, up);
  }
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), Math.max(0, waitMs));
  });
  return Promise.race([up, late]).finally(() => clearTimeout(timer));
}

/** The pool's connection to the node `host:port` (ioredis keeps them by that key). */
function nodeByKey(cluster: Cluster, key: string): Redis | undefined {
  return (
    cluster as unknown as { connectionPool: { getInstanceByKey(key: string): Redis | undefined } }
  ).connectionPool.getInstanceByKey(key);
}

/** Resolves once `cluster` has read its slot map again (or after `waitMs`, whichever is first). */
function relearned(cluster: Cluster, waitMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, Math.max(0, waitMs));
    cluster.refreshSlotsCache(() => {
      clearTimeout(timer);
      resolve();
    });
  });
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
 * method sends its command again, and `multi()` records what is queued and builds the
 * transaction again for each EXEC: a MULTI whose queued command was redirected was
 * aborted whole (EXECABORT). A `pipeline()` is not sent again: its commands are not one
 * unit, and those that were not redirected ran (its caller reads each reply); ioredis
 * itself sends it again when every reply is the same redirection.
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
        if (prop === 'multi') {
          method = (...args: unknown[]) => replayedTransaction(target, args);
        } else if (commands.has(prop) && !NOT_RESENT.has(prop)) {
          method = (...args: unknown[]) =>
            untilRun(
              target,
              () => fn.apply(target, args) as Promise<unknown>,
              () => slotOf(prop, args),
            );
        } else {
          method = fn.bind(target);
        }
        methods.set(prop, method);
      }
      return method;
    },
  });
}

type Transaction = Record<string, (...args: unknown[]) => unknown> & {
  exec(): Promise<[Error | null, unknown][] | null>;
};

/**
 * A stand-in for `cluster.multi()`: queued calls are recorded, and EXEC builds the
 * transaction afresh and sends it, again while a node ran none of it (a redirection in
 * its replies or the EXEC's rejection: EXECABORT).
 */
function replayedTransaction(cluster: Cluster, args: unknown[]): Transaction {
  const queued: [string, unknown[]][] = [];
  const send = async () => {
    const transaction = (cluster.multi as unknown as (...a: unknown[]) => Transaction).apply(cluster, args);
    for (const [name, callArgs] of queued) transaction[name](...callArgs);
    const replies = await transaction.exec();
    const redirected = replies?.find(([err]) => notRun(err) !== null);
    if (redirected) throw redirected[0];
    return replies;
  };
  const recorder: Transaction = new Proxy({} as Transaction, {
    get(_, prop) {
      if (prop === 'exec') return () => untilRun(cluster, send, () => queuedSlot(queued));
      if (prop === 'length') return queued.length;
      if (typeof prop !== 'string' || prop === 'then' || prop === 'toString' || prop === 'valueOf') return undefined;
      return (...callArgs: unknown[]) => {
        queued.push([prop, callArgs]);
        return recorder;
      };
    },
  });
  return recorder;
}

/** The slot of the first queued command with a key (a transaction's commands share one slot). */
function queuedSlot(queued: readonly [string, unknown[]][]): number | undefined {
  for (const [name, args] of queued) {
    const slot = slotOf(name, args);
    if (slot !== undefined) return slot;
  }
  return undefined;
}
