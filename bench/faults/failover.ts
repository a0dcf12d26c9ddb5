import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Redis } from 'ioredis';
import { waitForHealth } from '../../harness/http';
import { ROOT } from '../../harness/paths';
import { ClusterNode } from '../../harness/redis';
import { unsettled } from '../settled';
import { Context, merge, n, Outcome, PREFIX, PRODUCT, tallied, waitUntil } from './kit';
import { onClusterStage } from './cluster-stage';
import { NETWORK_503 } from './network-stage';

/** `fenced` as configured, or with REDIS_WAIT_REPLICAS=1. */
export type FailoverVariant = 'fenced' | 'fenced-wait';

/** Buyers answered by the master while its replicas are cut off (half through each app). */
const ALONE = 40;

/** How long WAIT waits for the replica (REDIS_WAIT_TIMEOUT_MS) in the WAIT variant. */
const WAIT_TIMEOUT_MS = 300;

/**
 * A master killed mid-sale with replicas present, and what asynchronous replication loses.
 *
 * Made deterministic, not lucky: once a quarter of the stock is sold, the product's
 * master's two replicas are stopped (SIGSTOP), so they fall behind; the suite waits
 * until the master has dropped them for not acknowledging (repl-timeout, set to 1 s
 * then), and then a wave of ALONE buyers is answered: every order they get, no
 * replica can ever have had (a replica's socket may still hold what was sent before
 * the drop, and it reads that on waking). The master is SIGKILLed, the replicas
 * resumed; once the first has read everything its socket held and seen its link go
 * down, it takes over (CLUSTER FAILOVER TAKEOVER), the other follows it, and a second
 * wave of buyers sells out on it. Two replicas, not one, so that the promoted master
 * has one for WAIT to count: with one, REDIS_WAIT_REPLICAS=1 answers every sale after
 * the failover 503 until a replica comes back.
 *
 * Without WAIT, those orders were answered 201 and are gone: the line counts the
 * acknowledged orders missing from the promoted master's stream (it must be > 0), and
 * says how the lock key and the fencing counter went back. With REDIS_WAIT_REPLICAS=1
 * the same orders were answered OUTCOME_UNKNOWN (no replica acknowledged them), so no
 * acknowledged order is lost, and each such buyer's retry with its Idempotency-Key
 * learns the truth from the promoted master: its order back, or none (a purchase now,
 * or SOLD_OUT).
 */
export function failover(ctx: Context, variant: FailoverVariant): Promise<Outcome> {
  const wait = variant === 'fenced-wait';
  const size = ctx.quick
    ? { buyers: 3_000, stock: 1_000, connections: 50 }
    : { buyers: 6_000, stock: 2_000, connections: 100 };
  const env: Record<string, string> = wait
    ? { REDIS_WAIT_REPLICAS: '1', REDIS_WAIT_TIMEOUT_MS: String(WAIT_TIMEOUT_MS) }
    : {};
  return onClusterStage(
    ctx,
    // Without WAIT the apps settle into PostgreSQL: the lost orders are there, for
    // `npm run audit` to name after the failover (docs/audit.md).
    { strategy: 'fenced', size, env, masters: 3, replicas: 2, nodeTimeoutMs: 1_000, settle: !wait },
    async (stage) => {
      const { cluster, k, slot } = stage;
      const master = await cluster.masterOfSlot(slot);
      const [replica, second] = await replicasOf(master, cluster.nodes, stage.node);
      const m = stage.node(master);
      const r = stage.node(replica);
      const wave = async (buyers: number, prefix: string) =>
        Promise.all(stage.apps.map((app, i) => stage.load(app, buyers, `${prefix}${i}-`)));
      // A quarter of the stock sold with every replica up.
      const opening = await wave(size.stock / 8, 'a');
      replica.pause();
      second.pause();
      const waves = [opening];
      try {
        // A master drops a replica that has not acknowledged for repl-timeout (60 s by
        // default): 1 s, so the stopped replicas are cut off soon, and from then on
        // nothing the master writes can reach them, not even through a socket buffer.
        await m.config('SET', 'repl-timeout', '1');
        await waitUntil(
          'the master to drop its stopped replicas (connected_slaves:0)',
          async () => /^connected_slaves:0\r?$/m.test(await m.info('replication')),
          30_000,
        );
        const stalledAt = await m.xlen(k.orders);
        // Buyers only the master hears: every order they get, no replica can have.
        waves.push(await wave(ALONE / 2, 'b'));
        // Settled before the kill: PostgreSQL, the system of record, has what the replicas never will.
        if (stage.database) await settledOn(m, 'the lone wave');
        const before = { ...(await snapshot(m, k)), stalledAt };
        master.kill();
        await master.exited;
        replica.resume();
        second.resume();
        await waitUntil('the replica to read what its socket held and see its master gone', async () =>
          /master_link_status:down/.test(await r.info('replication')),
        );
        await r.readonly();
        const after = await snapshot(r, k);
        await r.cluster('FAILOVER', 'TAKEOVER');
        await waitUntil(
          'the replica to serve the slot as a master',
          async () =>
            /role:master/.test(await r.info('replication')) &&
            // Between the takeover and the gossip no live master may claim the slot yet: not yet, not a failure.
            (await cluster.masterOfSlot(slot).then(
              (owner) => owner.port === replica.port,
              () => false,
            )),
        );
        // The other replica follows the promoted one: WAIT has a replica to count again.
        await cluster.waitUntilHealthy();
        await Promise.all(stage.apps.map((app) => waitForHealth(app.url, { timeoutMs: 20_000 })));
        const promotedAt = Date.now();
        // The sale goes on on the promoted master, to the end.
        waves.push(await wave(size.stock, 'c'));
        const retries = await stage.retryUnknown(r);
        return await verdictOf(before, after, promotedAt, retries);
      } finally {
        replica.resume();
        second.resume();
      }

      async function settledOn(node: Redis, what: string): Promise<void> {
        await waitUntil(
          `${what}'s orders settled into PostgreSQL`,
          async () => (await unsettled(node, k)) === 0,
          30_000,
        );
      }

      /**
       * `npm run audit` on the promoted master and PostgreSQL once settlement has caught
       * up there, as an operator runs it: its lines go to the log, and how many of the
       * lost orders it names.
       */
      async function auditOf(lostIds: readonly string[]): Promise<{ code: number; named: number }> {
        await settledOn(r, 'the promoted master');
        const args = [
          '--redis',
          replica.url,
          '--database',
          stage.database!,
          '--key-prefix',
          PREFIX,
          '--product',
          PRODUCT,
        ];
        let code = 0;
        let output: string;
        try {
          output = (await promisify(execFile)(process.execPath, [join(ROOT, 'scripts', 'audit.js'), ...args])).stdout;
        } catch (err) {
          const e = err as { code?: number; stdout?: string; stderr?: string };
          code = typeof e.code === 'number' ? e.code : -1;
          output = `${e.stdout ?? ''}${e.stderr ?? ''}`;
        }
        ctx.log(`$ npm run audit -- ${args.join(' ')}\n${output.trimEnd()}`);
        return { code, named: lostIds.filter((id) => output.includes(id)).length };
      }

      async function verdictOf(
        before: Awaited<ReturnType<typeof snapshot>> & { stalledAt: number },
        after: Awaited<ReturnType<typeof snapshot>>,
        promotedAt: number,
        retries: Awaited<ReturnType<typeof stage.retryUnknown>>,
      ): Promise<Outcome> {
        const loads = waves.flat();
        const alone = merge(waves[1]);
        const acknowledged = new Set([...loads.flatMap((l) => l.orderIds), ...retries.orderIds]);
        const stream = new Set((await r.xrange(k.orders, '-', '+')).map(([, f]) => f[f.indexOf('orderId') + 1]));
        const lostIds = [...acknowledged].filter((id) => !stream.has(id));
        const lost = lostIds.length;
        const audit = stage.database ? await auditOf(lostIds) : null;
        const soldAfter = (await r.xrange(k.orders, String(promotedAt), '+')).length;
        const onlyOnMaster = before.orders - before.stalledAt;
        const lockStory =
          before.lock === null
            ? 'no lock held on the master at the kill'
            : after.lock === before.lock
              ? 'the lock key survived'
              : `the lock key went back from ${before.lockHolder} to ${after.lock === null ? 'none' : after.lockHolder}`;
        return stage.judge(r, loads, retries, {
          name: `failover (${wait ? `fenced, REDIS_WAIT_REPLICAS=1` : 'fenced, no WAIT'}, 2 apps)`,
          allowed: NETWORK_503,
          lostIsTheLesson: !wait,
          story:
            `both replicas SIGSTOPped after ${n(before.stalledAt)} sold; ` +
            `master :${master.port} dropped them, then ${n(ALONE)} buyers were answered ${tallied(alone.codes)} and it wrote ${n(onlyOnMaster)} orders no replica can have; SIGKILL; ` +
            `replica :${replica.port} took over (CLUSTER FAILOVER TAKEOVER) with ${n(after.orders)} of the master's ${n(before.orders)} orders ` +
            `(${n(before.orders - after.orders)} gone), fence back from ${n(before.fence)} to ${n(after.fence)}, ${lockStory}; ` +
            `acknowledged orders lost: ${n(lost)}${lost > 0 ? ' (201s not in the promoted stream: units sold twice)' : ''}; ` +
            `${n(soldAfter)} orders on the promoted master` +
            (audit
              ? `; npm run audit exits ${audit.code} naming ${n(audit.named)} of them (in PostgreSQL, not in Redis)`
              : ''),
          checks: [
            () => (soldAfter > 0 ? null : 'nothing was sold after the failover'),
            // With WAIT the master, seen without live replicas, refuses buyers before writing
            // (REDIS_UNAVAILABLE); one that wrote before it noticed is told OUTCOME_UNKNOWN.
            // Without WAIT it sells alone, and the promoted replica lacks those orders.
            ...(wait
              ? [
                  () =>
                    (alone.codes.CREATED ?? 0) === 0 &&
                    (alone.codes.OUTCOME_UNKNOWN ?? 0) === onlyOnMaster &&
                    (alone.codes.OUTCOME_UNKNOWN ?? 0) + (alone.codes.REDIS_UNAVAILABLE ?? 0) === ALONE
                      ? null
                      : `${n(onlyOnMaster)} orders written while the replicas were cut off, but the buyers were told ${tallied(alone.codes)}`,
                ]
              : [
                  () =>
                    before.orders - after.orders > 0 ? null : 'the promoted replica lacks none of the master’s orders',
                  () => (onlyOnMaster > 0 ? null : 'the master wrote no order while its replicas were cut off'),
                  () =>
                    (alone.codes.CREATED ?? 0) === onlyOnMaster
                      ? null
                      : `${n(onlyOnMaster)} orders written while the replicas were cut off, but the buyers were told ${tallied(alone.codes)}`,
                ]),
            () =>
              audit === null || (audit.code === 1 && audit.named === lost)
                ? null
                : `npm run audit exited ${audit.code} naming ${n(audit.named)} of the ${n(lost)} lost orders`,
            () =>
              wait || lost === onlyOnMaster
                ? null
                : `${n(lost)} acknowledged orders lost, not the ${n(onlyOnMaster)} written on the master alone`,
          ],
        });
      }
    },
  );
}

/** The replicas of `master`, from their INFO replication (master_port). */
async function replicasOf(
  master: ClusterNode,
  nodes: readonly ClusterNode[],
  connect: (node: ClusterNode) => Redis,
): Promise<ClusterNode[]> {
  const of: ClusterNode[] = [];
  for (const node of nodes.filter((x) => x.role === 'replica')) {
    if (new RegExp(`^master_port:${master.port}\\r?$`, 'm').test(await connect(node).info('replication')))
      of.push(node);
  }
  if (of.length < 2) throw new Error(`:${master.port} has ${of.length} replicas, not 2`);
  return of;
}

/** The product's lock, fence, orders and stock on one node. */
async function snapshot(client: Redis, k: { lock: string; fence: string; orders: string; stock: string }) {
  const [lock, fence, orders, stock] = await Promise.all([
    client.get(k.lock),
    client.get(k.fence),
    client.xlen(k.orders),
    client.get(k.stock),
  ]);
  return {
    at: Date.now(),
    lock,
    lockHolder: lock === null ? 'none' : `pid ${lock.split(':')[0]}`,
    fence: Number(fence ?? 0),
    orders,
    stock: Number(stock),
  };
}
