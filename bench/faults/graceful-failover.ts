import type { Redis } from 'ioredis';
import { ClusterNode } from '../../harness/redis';
import { Context, n, Outcome, waitUntil } from './kit';
import { ClusterStage, onClusterStage, Timed } from './cluster-stage';
import { NetworkStrategy } from './network-stage';

/**
 * A planned failover under load: while two apps sell, the product's master hands its
 * slots to its replica with a plain `CLUSTER FAILOVER` (redis.io: the replica asks the
 * master to pause its clients, catches up with its replication offset, takes over, and
 * the old master turns replica). No write is lost that way, so no buyer should notice:
 * the paused master's clients wait, and every command sent to it afterwards hears
 * MOVED (ran nothing) and is sent to the new master. The line fails on any 5xx, and
 * on a failover no buyer was in flight for (answers sent before it was asked for and
 * answered after the new master served the slot).
 */
export function gracefulFailover(ctx: Context, strategy: NetworkStrategy): Promise<Outcome> {
  const size = ctx.quick
    ? { buyers: 1_500, stock: 1_000, connections: 50 }
    : { buyers: 4_000, stock: 3_000, connections: 100 };
  return onClusterStage(ctx, { strategy, size, masters: 3, replicas: 1 }, async (stage) => {
    const { k, slot } = stage;
    const pair = await failoverPair(stage, slot);
    const { master, replica, from, to } = pair;
    const loads = Promise.all(stage.apps.map((app, i) => stage.load(app, size.buyers, `a${i}-`)));
    await waitUntil('a quarter of the stock to sell', async () => Number(await from.get(k.stock)) <= size.stock * 0.75);
    const soldBefore = size.stock - Number(await from.get(k.stock));
    const { askedAt, doneAt } = await failOver(stage, pair, slot);
    const results = await loads;
    const retries = await stage.retryUnknown(to);
    const ordersAfter = (await to.xrange(k.orders, String(doneAt + 1), '+')).length;
    const failed = stage.heard.filter((a) => a.status >= 500);
    const inFlight = stage.heard.filter((a: Timed) => a.sentAt <= doneAt && a.at >= askedAt).length;
    return stage.judge(to, results, retries, {
      name: `graceful failover (${strategy}, 2 apps)`,
      allowed: [],
      story:
        `CLUSTER FAILOVER on replica :${replica.port} of master :${master.port} after ${n(soldBefore)} sold; ` +
        `it served the slot ${n(doneAt - askedAt)} ms after it was asked; ` +
        `5xx ×${n(failed.length)} of the ${n(inFlight)} buyers in flight during it; ` +
        `${n(ordersAfter)} orders written on :${replica.port} after it`,
      checks: [
        () => (inFlight > 0 ? null : 'no buyer was in flight during the failover'),
        () => (failed.length === 0 ? null : `${failed.length} 5xx during a failover that loses nothing`),
        () => (ordersAfter > 0 ? null : 'nothing was sold after the failover'),
      ],
    });
  });
}

/** The master serving `slot`, its replica, and a harness connection to each. */
export interface FailoverPair {
  readonly master: ClusterNode;
  readonly replica: ClusterNode;
  readonly from: Redis;
  readonly to: Redis;
}

export async function failoverPair(stage: ClusterStage, slot: number): Promise<FailoverPair> {
  const master = await stage.cluster.masterOfSlot(slot);
  const replica = await replicaOf(master, stage.cluster.nodes, stage);
  return { master, replica, from: stage.node(master), to: stage.node(replica) };
}

/**
 * A plain `CLUSTER FAILOVER` on the pair's replica; resolves once it serves `slot` as a
 * master, with when it was asked and when that was (Date.now()).
 */
export async function failOver(
  stage: ClusterStage,
  { replica, to }: FailoverPair,
  slot: number,
): Promise<{ askedAt: number; doneAt: number }> {
  const askedAt = Date.now();
  await to.cluster('FAILOVER');
  await waitUntil(
    'the replica to serve the slot as a master',
    async () =>
      /role:master/.test(await to.info('replication')) &&
      (await stage.cluster.masterOfSlot(slot).then(
        (owner) => owner.port === replica.port,
        () => false,
      )),
  );
  return { askedAt, doneAt: Date.now() };
}

/** The replica of `master`, from its INFO replication (master_port). */
async function replicaOf(
  master: ClusterNode,
  nodes: readonly ClusterNode[],
  stage: { node(node: ClusterNode): { info(section: string): Promise<string> } },
): Promise<ClusterNode> {
  for (const node of nodes.filter((x) => x.role === 'replica')) {
    if (new RegExp(`^master_port:${master.port}\\r?$`, 'm').test(await stage.node(node).info('replication')))
      return node;
  }
  throw new Error(`:${master.port} has no replica`);
}
