import { setTimeout as sleep } from 'node:timers/promises';
import { DEFAULT_PAYMENT_TIMEOUT_MS } from '../../src/sale/sale-limits';
import calculateSlot from 'cluster-key-slot';
import { Cluster, Redis, RedisOptions } from 'ioredis';
import {
  ClusterNode,
  PrivateCluster,
  PrivateClusterOptions,
  PrivateRedis,
  PrivateRedisOptions,
  startPrivateCluster,
  startPrivateRedis,
} from '../../harness/redis';
import { createRedisCluster, whenReady } from '../../src/redis/create-client';
import { KeyLayout, ProductKeys } from '../../src/redis/key-layout';
import { resetSale, resetSaleKeys } from '../../src/redis/lua-scripts';

export interface TestRedis {
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  /** SIGTERM and wait; the data folder is removed. */
  stop(): Promise<void>;
  /** SIGKILL without waiting: for tests of a Redis that vanishes. */
  kill(): void;
  /** Resolves once the process has exited. */
  readonly exited: Promise<void>;
}

/** A real redis-server on a free loopback port with its own temporary data folder (harness/redis.ts). */
export async function startTestRedis(options: PrivateRedisOptions = {}): Promise<TestRedis> {
  const redis: PrivateRedis = await startPrivateRedis(options);
  return {
    url: redis.url,
    port: redis.port,
    dir: redis.dir,
    kill: redis.kill,
    exited: redis.exited,
    stop: redis.remove,
  };
}

/**
 * Until a cluster client can serve every key: its slot map known and every master's
 * connection up (whenReady). Its 'ready' is not that: with no offline queue, a command
 * sent to a master whose connection is still opening fails "Connection is closed.", as
 * door-cluster.e2e's first CLUSTER SLOTS did once when the machine was busy.
 */
export async function clusterReady(client: Cluster): Promise<void> {
  if (!(await whenReady(client, 20_000))) throw new Error('the cluster client was not ready within 20 s');
}

let prefixes = 0;
/** A key prefix no other test in this process uses, so tests never see each other's keys. */
export function uniquePrefix(name: string): string {
  return `t${process.pid}-${++prefixes}-${name}:`;
}

/** Product `phone` under a fresh key prefix, its sale started with `stock` units and `perUserLimit` each. */
export async function startSaleIn(
  redis: Redis,
  stock: number,
  perUserLimit: number,
  name = 'sale',
): Promise<{ keys: KeyLayout; k: ProductKeys }> {
  const keys = new KeyLayout(uniquePrefix(name));
  const k = keys.product('phone');
  await resetPlainSale(redis, k, stock, perUserLimit);
  return { keys, k };
}

/**
 * reset-sale-10.lua for a plain sale of `k`'s product (its orders discarded, any family
 * may sell it, the default payment deadline, no window, no queue, not settled): the new
 * sale's id, or the script's refusal.
 */
export function resetPlainSale(
  redis: Redis,
  k: ProductKeys,
  stock: number,
  perUserLimit: number,
): ReturnType<typeof resetSale.run> {
  return resetSale.run(
    redis,
    resetSaleKeys(k),
    stock,
    perUserLimit,
    '1',
    '',
    '0',
    DEFAULT_PAYMENT_TIMEOUT_MS,
    '',
    '',
    '',
    '',
    '0',
    '',
    '',
    '0',
  );
}

/**
 * QUIT a test's client while its Redis still runs. Once ioredis has seen the connection
 * close ('close', then 'reconnecting'), QUIT would wait for a server that is gone, so
 * the client is only disconnected; that leaves ioredis' disconnectTimeout timer (2 s)
 * holding the process, so a spec closes its clients before it stops their Redis where
 * it can (a spec that kills a node on purpose cannot).
 */
export async function closeClient(client: Redis | undefined): Promise<void> {
  if (!client || client.status === 'end') return;
  if (client.status === 'close' || client.status === 'reconnecting') {
    client.disconnect();
    return;
  }
  await client.quit().catch(() => client.disconnect());
}

/**
 * For a spec file: one real Redis started before its tests, `client()` for a fresh
 * connection per simulated process, and `closing(x)`, which returns x and closes it
 * after the file's tests. Locks keep a subscriber connection of their own once they
 * have waited for a lock; left open, it keeps Jest from exiting.
 *
 * After the file, the closing items go first, then the clients, then Redis: a
 * subscriber still open when its Redis stops can only be disconnected, and ioredis
 * then holds the process for its disconnectTimeout (2 s) (closeClient), long enough
 * for Jest to force-exit a worker that had already run its last file.
 */
export function useTestRedis(): {
  url(): string;
  client(options?: RedisOptions): Redis;
  closing<T extends { close(): Promise<void> }>(item: T): T;
} {
  let redis: TestRedis | undefined;
  const clients: Redis[] = [];
  const items: { close(): Promise<void> }[] = [];
  beforeAll(async () => {
    redis = await startTestRedis();
  });
  afterAll(async () => {
    await Promise.all(items.map((item) => item.close()));
    await Promise.all(clients.map(closeClient));
    await redis?.stop();
  });
  return {
    url: () => redis!.url,
    client: (options?: RedisOptions) => {
      const c = new Redis(redis!.url, options ?? {});
      clients.push(c);
      return c;
    },
    closing: (item) => {
      items.push(item);
      return item;
    },
  };
}

/**
 * A private master with one replica linked to it, started before the file's tests and
 * removed after them: `client` talks to the master; a test stops the replica with SIGSTOP
 * (its `pid`) to see what a write does without it.
 */
export function useReplicatedRedis(): {
  readonly master: PrivateRedis;
  readonly replica: PrivateRedis;
  readonly client: Redis;
} {
  let master: PrivateRedis | undefined;
  let replica: PrivateRedis | undefined;
  let client: Redis | undefined;
  beforeAll(async () => {
    master = await startPrivateRedis();
    replica = await startPrivateRedis();
    const r = new Redis(replica.url);
    await r.replicaof('127.0.0.1', master.port);
    while (!/master_link_status:up/.test(await r.info('replication'))) await sleep(20);
    await r.quit();
    client = new Redis(master.url);
  });
  afterAll(async () => {
    await closeClient(client);
    await replica?.remove();
    await master?.remove();
  });
  // Getters: read in a test, once beforeAll has started them.
  return {
    get master() {
      return master!;
    },
    get replica() {
      return replica!;
    },
    get client() {
      return client!;
    },
  };
}

/**
 * Runs `during` while Redis holds every write (CLIENT PAUSE WRITE, from `admin`): a
 * write sent meanwhile reaches Redis and waits there, and runs once the pause ends,
 * after its sender may have given up on it. Reads are answered throughout.
 */
export async function whileWritesHeld<T>(admin: Redis, during: () => Promise<T>): Promise<T> {
  await admin.client('PAUSE', 60_000, 'WRITE');
  try {
    return await during();
  } finally {
    await admin.client('UNPAUSE');
  }
}

/** How many times Redis has run `command` (INFO commandstats), to prove a command really ran. */
export async function commandCalls(admin: Redis, command: string): Promise<number> {
  const stats = await admin.info('commandstats');
  return Number(new RegExp(`^cmdstat_${command.toLowerCase()}:calls=(\\d+)`, 'm').exec(stats)?.[1] ?? 0);
}

/** A PrivateCluster whose stop() also removes its folder, as TestRedis's does. */
export type TestCluster = Omit<PrivateCluster, 'remove'>;

/** A real local Redis Cluster on free loopback ports, in a temporary folder (harness/redis.ts). */
export async function startTestCluster(options: PrivateClusterOptions = {}): Promise<TestCluster> {
  const cluster = await startPrivateCluster(options);
  return { ...cluster, stop: cluster.remove };
}

/** The node that replicates the master on `port`, by the nodes' INFO replication (a failover swaps them). */
export async function replicaOf(cluster: Pick<TestCluster, 'nodes'>, port: number): Promise<ClusterNode> {
  for (const node of cluster.nodes.filter((n) => n.port !== port)) {
    const admin = new Redis(node.url);
    const info = await admin.info('replication').finally(() => admin.quit());
    if (new RegExp(`^master_port:${port}\\r?$`, 'm').test(info)) return node;
  }
  throw new Error(`:${port} has no replica`);
}

/** The slot of `key`, the master that serves it now and that master's replica: a failover's two ends. */
export async function failoverPair(
  cluster: TestCluster,
  key: string,
): Promise<{ slot: number; master: ClusterNode; replica: ClusterNode }> {
  const slot = calculateSlot(key);
  const master = await cluster.masterOfSlot(slot);
  return { slot, master, replica: await replicaOf(cluster, master.port) };
}

/** Polls `probe` until it returns a value, at most 30 s. */
export async function until<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** `CLUSTER FAILOVER TAKEOVER` on `replica`; resolves once the cluster names it the master of `slot`. */
export async function takeOver(cluster: TestCluster, replica: ClusterNode, slot: number): Promise<void> {
  const admin = new Redis(replica.url);
  try {
    await admin.cluster('FAILOVER', 'TAKEOVER');
  } finally {
    await admin.quit();
  }
  await until('the slot map to name the replica as the master', async () =>
    (await cluster.masterOfSlot(slot)).port === replica.port ? true : undefined,
  );
}

/**
 * Has `client` relearn the slot map now, and resolves once its connection to the master
 * on `port` is up (opened and checked: a connection the refresh dropped has closed by then).
 */
export async function relearnedMap(client: Cluster, port: number): Promise<void> {
  const refreshed = new Promise((resolve) => client.once('refresh', resolve));
  client.refreshSlotsCache();
  await refreshed;
  await until(
    'the client to be connected to the new master',
    async () => client.nodes('master').some((n) => n.options.port === port && n.status === 'ready') || undefined,
  );
}

/**
 * A master other than the cluster's first node (which a test's own admin connection
 * asks), and the stock key of a product whose slot it serves: a master a test may kill or
 * stop while it still reads the slot map.
 */
export async function productOnAnotherMaster(
  cluster: TestCluster,
  keys: KeyLayout,
): Promise<{ master: ClusterNode; key: string }> {
  const admin = new Redis(cluster.nodes[0].url);
  const map = await readSlotMap(admin).finally(() => admin.quit());
  const address = map.masters.find((m) => m !== `127.0.0.1:${cluster.nodes[0].port}`)!;
  const master = cluster.nodes.find((n) => `127.0.0.1:${n.port}` === address)!;
  const id = map
    .productsOnEveryShard(keys)
    .find((p) => map.masterOfSlot(calculateSlot(keys.product(p).stock)) === address)!;
  return { master, key: keys.product(id).stock };
}

/** A cluster client of the test's own (its seed nodes the cluster's), ready. */
export async function clusterClient(cluster: TestCluster): Promise<Cluster> {
  const nodes = cluster.clusterNodes.split(',').map((s) => {
    const [host, port] = s.split(':');
    return { host, port: Number(port) };
  });
  const client = createRedisCluster({ nodes, tls: false }, 'test');
  await clusterReady(client);
  return client;
}

/**
 * Registers the hooks of a file whose tests share one private Redis Cluster of `masters`
 * masters (and `replicas` replicas each) and a client of it: started before the first test, stopped after the last;
 * each test's apps (`opened`) closed after it.
 */
export function useTestCluster(
  masters = 3,
  replicas = 0,
): {
  readonly cluster: TestCluster;
  readonly client: Cluster;
  opened<T extends { close(): Promise<void> }>(app: T): T;
} {
  let cluster: TestCluster | undefined;
  let client: Cluster | undefined;
  const open: { close(): Promise<void> }[] = [];
  beforeAll(async () => {
    cluster = await startTestCluster({ masters, replicas });
    client = await clusterClient(cluster);
  }, 60_000);
  afterEach(async () => {
    await Promise.all(open.splice(0).map((a) => a.close()));
  });
  afterAll(async () => {
    client?.disconnect();
    await cluster?.stop();
  });
  return {
    get cluster() {
      return cluster!;
    },
    get client() {
      return client!;
    },
    opened: (app) => {
      open.push(app);
      return app;
    },
  };
}

/** Which master serves each slot, as one node's CLUSTER SLOTS said when it was read. */
export interface SlotMap {
  /** `host:port` of every master. */
  readonly masters: readonly string[];
  masterOfSlot(slot: number): string;
  /** One product id per master: the first of p1, p2, ... whose keys (under `keys`) land on it. */
  productsOnEveryShard(keys: KeyLayout): string[];
}

export async function readSlotMap(node: Pick<Redis, 'call'>): Promise<SlotMap> {
  const shards = (await node.call('CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
  const masters = shards.map(([, , [host, port]]) => `${host}:${port}`);
  const masterOfSlot = (slot: number) => {
    const shard = shards.find(([from, to]) => slot >= from && slot <= to);
    if (!shard) throw new Error(`no master serves slot ${slot}`);
    return `${shard[2][0]}:${shard[2][1]}`;
  };
  return {
    masters,
    masterOfSlot,
    productsOnEveryShard: (keys) => {
      const byMaster = new Map<string, string>();
      for (let i = 1; byMaster.size < new Set(masters).size; i++) {
        const id = `p${i}`;
        const master = masterOfSlot(calculateSlot(keys.product(id).stock));
        if (!byMaster.has(master)) byMaster.set(master, id);
      }
      return [...byMaster.values()];
    },
  };
}
