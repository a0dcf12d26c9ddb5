import { setTimeout as sleep } from 'node:timers/promises';
import { WaitingRoom } from '../../src/door/waiting-room';
import { KeyLayout } from '../../src/redis/key-layout';
import { homeBucket } from '../../src/sale/buckets';
import { request, startTestApp, TestApp } from './app';
import { useTestCluster } from './redis';

/** A user id whose home bucket among `n` is `bucket` (homeBucket()), named `<stem><i>`. */
export function homedIn(bucket: number, n: number, stem: string): string {
  for (let i = 0; ; i++) if (homeBucket(`${stem}${i}`, n) === bucket) return `${stem}${i}`;
}

/**
 * Polls `what` every 20 ms until it holds, 20 s at most (the caller asserts what it waited
 * for): a bound far past what a loaded machine takes, so the wait never decides a test.
 */
export async function until(what: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 1000 && !(await what()); i++) await sleep(20);
}

/**
 * What the tests of a waiting room over escrow buckets share, on the cluster `shared`
 * (useTestCluster): an app under `fenced`, its queue and purchase routes, and each
 * bucket's stock as Redis has it.
 */
export function queueOverBuckets(shared: ReturnType<typeof useTestCluster>) {
  return {
    app: async (prefix: string): Promise<TestApp> =>
      shared.opened(
        await startTestApp({
          REDIS_CLUSTER_NODES: shared.cluster.clusterNodes,
          KEY_PREFIX: prefix,
          LOCK_STRATEGY: 'fenced',
        }),
      ),
    put: (url: string, id: string, json: Record<string, unknown>) =>
      request(url, 'PUT', `/api/products/${id}`, { json, admin: true }),
    join: (url: string, id: string, userId: string) =>
      request(url, 'POST', `/api/products/${id}/queue`, { json: { userId } }),
    buyWith: (url: string, id: string, userId: string, pass: string, quantity = 1) =>
      request(url, 'POST', `/api/products/${id}/orders`, {
        json: { userId, quantity },
        headers: { 'admission-pass': pass },
      }),
    bucketIds: async (url: string, id: string): Promise<string[]> =>
      (await request(url, 'GET', `/api/products/${id}/buckets`, { admin: true })).body.map((x: { id: string }) => x.id),
    stocks: (keys: KeyLayout, ids: string[]) =>
      Promise.all(ids.map(async (id) => Number((await shared.client.get(keys.product(id).stock)) ?? 0))),
    /** The counts the app's waiting room keeps (COUNT_TRUST_MS): cleared, its next join or read counts afresh. */
    countsOf: (a: TestApp) =>
      (a.app.get(WaitingRoom) as unknown as { counts: Map<string, { at: number; count: Promise<string> }> }).counts,
  };
}
