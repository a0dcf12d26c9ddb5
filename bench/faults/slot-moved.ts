import type { Redis } from 'ioredis';
import { ClusterNode } from '../../harness/redis';
import { Context, n, Outcome, waitUntil } from './kit';
import { onClusterStage, Timed } from './cluster-stage';
import { NetworkStrategy } from './network-stage';

/** Keys per MIGRATE: small batches, so the slot spends a while with its keys split between two masters. */
const BATCH = 2;

/** What buyers may be told while the slot moves: nothing of the 5xx kind (a redirection is sent again). */
const MOVE_503: string[] = [];

/**
 * The product's slot migrated from its master to another while two apps sell it, by
 * the real procedure (redis.io, CLUSTER SETSLOT): IMPORTING on the target, MIGRATING
 * on the source, its keys MIGRATEd a few at a time, then SETSLOT NODE on every master.
 *
 * While the keys are split, a purchase (every one is a multi-key script or MULTI)
 * hears ASK or TRYAGAIN: the node ran nothing. ioredis follows a command sent alone a
 * bounded number of times, and hands a command of an auto-pipelined batch whose replies
 * differ its ASK, TRYAGAIN or MOVED as its answer; the app's client sends every such
 * command again (src/redis/unrun-retry.ts) until a node runs it. So no buyer hears a
 * 5xx, in flight during the move or after it: checked, with when each request was sent
 * and answered. The suite waits, after the first batch, until buyers have really met
 * the split slot (a redirection counted by the nodes), then finishes the move. Then the
 * load finishes the sale on the new master, and the verdict is read there.
 */
export function slotMoved(ctx: Context, strategy: NetworkStrategy): Promise<Outcome> {
  const size = ctx.quick
    ? { buyers: 1_500, stock: 1_000, connections: 50 }
    : { buyers: 4_000, stock: 3_000, connections: 100 };
  return onClusterStage(ctx, { strategy, size, masters: 3 }, async (stage) => {
    const { cluster, k, slot } = stage;
    const source = await cluster.masterOfSlot(slot);
    const target = (await cluster.masters()).find((m) => m !== source)!;
    const from = stage.node(source);
    const to = stage.node(target);
    const loads = Promise.all(stage.apps.map((app, i) => stage.load(app, size.buyers, `a${i}-`)));
    await waitUntil('a quarter of the stock to sell', async () => Number(await from.get(k.stock)) <= size.stock * 0.75);
    const soldBefore = size.stock - Number(await from.get(k.stock));
    const others = (await cluster.masters()).filter((m) => m !== source && m !== target).map((m) => stage.node(m));
    const move = await moveSlot(slot, { node: source, client: from }, { node: target, client: to }, others);
    const results = await loads;
    const retries = await stage.retryUnknown(to);
    const owner = await cluster.masterOfSlot(slot);
    const leftOnSource = Number(await from.cluster('COUNTKEYSINSLOT', slot));
    const ordersAfter = (await to.xrange(k.orders, String(move.doneAt + 1), '+')).length;
    const failed = stage.heard.filter((a) => a.status >= 500);
    // A buyer who came after the move must never hear a 5xx (one sent during it may hear it just after).
    const late = failed.filter((a) => a.sentAt > move.doneAt);
    // The bound: only a buyer in flight while the slot moved (sent before SETSLOT NODE
    // finished, answered after IMPORTING began) can meet a redirection that ends in a 503.
    const inFlight = stage.heard.filter((a) => a.sentAt <= move.doneAt && a.at >= move.startedAt).length;
    const outside = failed.filter((a) => a.sentAt > move.doneAt || a.at < move.startedAt).length;
    const window = (a: Timed) => a.at - move.startedAt;
    const sent = (a: Timed) => a.sentAt - move.startedAt;
    return stage.judge(to, results, retries, {
      name: `slot moved (${strategy}, 2 apps)`,
      allowed: MOVE_503,
      story:
        `slot ${slot} moved from :${source.port} to :${target.port} after ${n(soldBefore)} sold: ` +
        `${move.keys} keys in ${move.batches} MIGRATEs, buyers met the split slot (ASK ×${n(move.redirects.ASK)}, TRYAGAIN ×${n(move.redirects.TRYAGAIN)}), ` +
        `SETSLOT NODE on every master ${n(move.doneAt - move.startedAt)} ms after IMPORTING; ` +
        `5xx ×${n(failed.length)} of the ${n(inFlight)} buyers in flight during the move${failed.length > 0 ? ` (${tally(failed)}), sent ${n(Math.min(...failed.map(sent)))}..${n(Math.max(...failed.map(sent)))} ms and answered ${n(Math.min(...failed.map(window)))}..${n(Math.max(...failed.map(window)))} ms after IMPORTING` : ''}, ${n(late.length)} to buyers who came after the move; ` +
        `${n(ordersAfter)} orders written on :${target.port} after it`,
      checks: [
        () => (owner === target ? null : `the slot is served by :${owner.port}, not the target :${target.port}`),
        () => (leftOnSource === 0 ? null : `${leftOnSource} keys of the slot left on the source`),
        () => (move.redirects.ASK + move.redirects.TRYAGAIN > 0 ? null : 'no buyer met the split slot'),
        () => (late.length === 0 ? null : `${late.length} 5xx to buyers who came after the move completed`),
        () => (outside === 0 ? null : `${outside} 5xx to buyers not in flight during the move`),
        () =>
          failed.length === 0 ? null : `${failed.length} 5xx to buyers in flight during the move (${tally(failed)})`,
        () => (ordersAfter > 0 ? null : 'nothing was sold after the move'),
      ],
    });
  });
}

/** "CODE ×count, ..." for some answers. */
function tally(answers: Timed[]): string {
  const codes = new Map<string, number>();
  for (const a of answers) codes.set(a.code, (codes.get(a.code) ?? 0) + 1);
  return [...codes].map(([code, x]) => `${code} ×${n(x)}`).join(', ');
}

export interface Master {
  readonly node: ClusterNode;
  readonly client: Redis;
}

/** Redirections the nodes answered (INFO errorstats: errorstat_ASK, errorstat_TRYAGAIN). */
async function redirects(clients: Redis[]): Promise<{ ASK: number; TRYAGAIN: number }> {
  const total = { ASK: 0, TRYAGAIN: 0 };
  for (const client of clients) {
    const info = await client.info('errorstats');
    for (const name of ['ASK', 'TRYAGAIN'] as const) {
      total[name] += Number(new RegExp(`^errorstat_${name}:count=(\\d+)`, 'm').exec(info)?.[1] ?? 0);
    }
  }
  return total;
}

/**
 * Moves `slot` from `source` to `target` as redis.io's CLUSTER SETSLOT page says, and
 * waits, after the first MIGRATE, until the nodes have redirected a buyer's command.
 */
export async function moveSlot(
  slot: number,
  source: Master,
  target: Master,
  others: Redis[],
): Promise<{
  startedAt: number;
  doneAt: number;
  batches: number;
  keys: number;
  redirects: { ASK: number; TRYAGAIN: number };
}> {
  const [sourceId, targetId] = await Promise.all([source.client.cluster('MYID'), target.client.cluster('MYID')]);
  const pair = [source.client, target.client];
  const before = await redirects(pair);
  const startedAt = Date.now();
  await target.client.cluster('SETSLOT', slot, 'IMPORTING', String(sourceId));
  await source.client.cluster('SETSLOT', slot, 'MIGRATING', String(targetId));
  let batches = 0;
  let keys = 0;
  for (;;) {
    const batch = (await source.client.cluster('GETKEYSINSLOT', slot, BATCH)) as string[];
    if (batch.length === 0) break;
    await source.client.call('MIGRATE', '127.0.0.1', String(target.node.port), '', '0', '5000', 'KEYS', ...batch);
    batches++;
    keys += batch.length;
    if (batches === 1) {
      await waitUntil('a buyer to meet the split slot (ASK or TRYAGAIN)', async () => {
        const now = await redirects(pair);
        return now.ASK + now.TRYAGAIN > before.ASK + before.TRYAGAIN;
      });
    }
  }
  // The target first, so the source's MOVED never points at a node that does not yet know it owns the slot.
  for (const client of [target.client, source.client, ...others]) {
    await client.cluster('SETSLOT', slot, 'NODE', String(targetId));
  }
  const doneAt = Date.now();
  const after = await redirects(pair);
  return {
    startedAt,
    doneAt,
    batches,
    keys,
    redirects: { ASK: after.ASK - before.ASK, TRYAGAIN: after.TRYAGAIN - before.TRYAGAIN },
  };
}
