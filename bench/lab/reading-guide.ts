/**
 * The reading guide: for each lesson, the few files that implement it, in the order to
 * read them (what a lock is, the lock, its Lua, the purchase path that uses it; for a
 * fault, the scenario, then the code it proves). test/lab.e2e-spec.ts checks each exists.
 */

export interface GuideEntry {
  readonly path: string;
  /** Why to read it, in a few words. */
  readonly why: string;
}

const LOCK: GuideEntry = { path: 'src/locks/lock.ts', why: 'what every lock promises: using(), hold, validity' };
const RULES: GuideEntry = { path: 'src/orders/sale-rules.ts', why: 'the read-check-write every lock protects' };
const PATH: GuideEntry = {
  path: 'src/orders/purchases/purchase-path.ts',
  why: 'how the strategy picks its purchase path',
};
const PER_BUYER: GuideEntry = {
  path: 'src/orders/purchases/per-buyer.purchases.ts',
  why: 'one hold per buyer: the purchase under the lock',
};
const BATCHED: GuideEntry = {
  path: 'src/orders/purchases/batched.purchases.ts',
  why: 'a batch of buyers served under one hold',
};
const NAIVE: GuideEntry = { path: 'src/locks/strategies/naive-lock.ts', why: 'the spin loop the mistakes share' };
const MISTAKES: GuideEntry = {
  path: 'src/locks/strategies/classic-mistakes.spec.ts',
  why: 'the test that makes the mistake happen',
};
const RELEASE: GuideEntry = { path: 'src/redis/scripts/release-lock-1.lua', why: 'compare-and-delete release' };
const strategyFile = (name: string, why: string): GuideEntry => ({
  path: `src/locks/strategies/${name}.strategy.ts`,
  why,
});
const mistake = (name: string, why: string) => [LOCK, NAIVE, strategyFile(name, why), PER_BUYER, MISTAKES];

/** By strategy name. */
export const STRATEGY_GUIDE: Readonly<Record<string, readonly GuideEntry[]>> = {
  none: [LOCK, strategyFile('none', 'a lock that holds nothing'), PATH, PER_BUYER, RULES],
  'setnx-no-ttl': mistake('setnx-no-ttl', 'SETNX, no expiry'),
  'setnx-then-expire': mistake('setnx-then-expire', 'SETNX, then EXPIRE: two commands'),
  'unchecked-del': mistake('unchecked-del', 'release with a plain DEL'),
  'get-then-del': mistake('get-then-del', 'GET, compare, DEL: two commands'),
  'expiry-timestamp': mistake('expiry-timestamp', "an expiry time judged by each client's clock"),
  lock: [LOCK, strategyFile('lock', 'SET NX PX with a random token'), RELEASE, PATH, BATCHED, RULES],
  fenced: [
    LOCK,
    strategyFile('fenced', 'the lock plus a fencing token'),
    {
      path: 'src/redis/scripts/fenced-acquire-6.lua',
      why: "SET NX PX and INCR the fence, atomically, and the batch's read with them",
    },
    { path: 'src/redis/scripts/fenced-write-8.lua', why: 'the write Redis refuses once a later token exists' },
    RELEASE,
    BATCHED,
    { path: 'src/orders/fenced-write.spec.ts', why: 'the paused holder, refused' },
  ],
  reentrant: [
    LOCK,
    strategyFile('reentrant', 'a hash lock with a watchdog'),
    { path: 'src/redis/scripts/reentrant-acquire-1.lua', why: 'HINCRBY owner + PEXPIRE' },
    { path: 'src/redis/scripts/reentrant-renew-1.lua', why: "the watchdog's renewal" },
    { path: 'src/redis/scripts/reentrant-release-1.lua', why: 'count down, DEL at zero' },
    { path: 'src/orders/purchases/reentrant.purchases.ts', why: 'the purchase that takes the lock twice' },
  ],
  redlock: [LOCK, strategyFile('redlock', 'a quorum of independent nodes'), BATCHED, RULES],
  atomic: [
    PATH,
    { path: 'src/orders/purchases/scripted.purchases.ts', why: 'one script per purchase, no lock' },
    { path: 'src/redis/scripts/purchase-7.lua', why: 'the rules in Lua' },
    RULES,
  ],
  optimistic: [
    PATH,
    { path: 'src/orders/purchases/optimistic.purchases.ts', why: 'WATCH / MULTI / EXEC, retried on conflict' },
    RULES,
  ],
};

const KIT: GuideEntry = { path: 'bench/faults/kit.ts', why: 'apps, waiting for states, the verdict' };
const RUN: GuideEntry = { path: 'bench/faults/run.ts', why: 'the registry of scenarios' };
const STOP: GuideEntry = { path: 'src/orders/fault-stop.ts', why: 'the hook that stops a holder at its write' };
const NETWORK: GuideEntry = { path: 'bench/faults/network-stage.ts', why: 'apps behind a TCP proxy each' };
const PROXY: GuideEntry = { path: 'harness/tcp-proxy.ts', why: 'the nemesis: holds, drops, delays a request' };
const CLUSTER: GuideEntry = { path: 'bench/faults/cluster-stage.ts', why: 'two apps on a Redis Cluster' };
const scenario = (file: string, why: string): GuideEntry => ({ path: `bench/faults/${file}.ts`, why });

/** By the first scenario name of a fault lesson's family (its prefix before the strategy). */
export const FAULT_GUIDE: readonly [prefix: string, entries: readonly GuideEntry[]][] = [
  ['killed', [RUN, scenario('holder-killed', 'the scenario'), KIT, STOP]],
  [
    'paused-',
    [
      RUN,
      scenario('holder-paused', 'the scenario'),
      KIT,
      STOP,
      { path: 'src/redis/scripts/fenced-write-8.lua', why: 'the fence that refuses the late write' },
    ],
  ],
  ['redis-restarted', [RUN, scenario('redis-restarted', 'the scenario'), KIT]],
  ['redis-paused', [RUN, scenario('redis-paused', 'the scenario'), KIT]],
  ['redlock', [RUN, scenario('redlock-nodes', 'the scenario'), KIT, strategyFile('redlock', 'the lock under test')]],
  [
    'door-false-refusal',
    [
      RUN,
      scenario('door-false-refusal', 'the scenario'),
      { path: 'src/door/door-refusals.ts', why: "the door's memory of a refusal (DOOR_TRUST_MS)" },
      { path: 'bench/history/check.ts', why: 'falseRefusals: the check that names the refusal' },
      KIT,
    ],
  ],
  ['door-', [RUN, scenario('door', 'the scenarios'), KIT]],
  [
    'lost-reply-',
    [
      RUN,
      scenario('lost-reply', 'the scenario'),
      NETWORK,
      PROXY,
      { path: 'src/orders/idempotency.ts', why: 'how a retry learns the truth' },
    ],
  ],
  ['unreachable-', [RUN, scenario('redis-unreachable', 'the scenario'), NETWORK, PROXY]],
  ['partition-', [RUN, scenario('partition', 'the scenario'), NETWORK, PROXY]],
  ['timeout-', [RUN, scenario('redis-timeout', 'the scenario'), NETWORK, PROXY]],
  ['delayed-write-', [RUN, scenario('delayed-write', 'the scenario'), NETWORK, PROXY]],
  [
    'set-nx-delayed-',
    [
      RUN,
      scenario('set-nx-delayed', 'the scenario'),
      NETWORK,
      PROXY,
      { path: 'src/locks/best-effort-undo.ts', why: 'the undo sent behind a SET NX without reply' },
    ],
  ],
  ['cluster-slot-moved-', [RUN, scenario('slot-moved', 'the scenario'), CLUSTER]],
  ['cluster-failover-graceful-', [RUN, scenario('graceful-failover', 'the scenario'), CLUSTER]],
  [
    'cluster-failover-',
    [
      RUN,
      scenario('failover', 'the scenario'),
      CLUSTER,
      { path: 'src/orders/replica-acks.ts', why: 'waiting for a replica to have the write' },
    ],
  ],
  [
    'settle-',
    [
      RUN,
      scenario('settlement', 'the scenarios'),
      { path: 'src/settlement/settler.ts', why: 'the consumer group writing PostgreSQL' },
      { path: 'src/orders/expiry-sweeper.ts', why: 'the payment deadline' },
    ],
  ],
];

/** The guide of a fault lesson whose scenarios are `names`. */
export function faultGuide(names: readonly string[]): readonly GuideEntry[] {
  return FAULT_GUIDE.find(([prefix]) => names[0].startsWith(prefix))?.[1] ?? [RUN, KIT];
}

const SHARD_SALE: GuideEntry = {
  path: 'bench/lab/shard-sale.ts',
  why: 'the lesson: one product on a 3-master cluster',
};

/** By a shard lesson's bucket count: one bucket is one hash tag, one slot; more are escrow. */
export function shardGuide(buckets: number): readonly GuideEntry[] {
  const tag: GuideEntry = { path: 'src/redis/key-layout.ts', why: 'every key of a product under one hash tag' };
  if (buckets === 1) return [tag, SHARD_SALE];
  return [
    { path: 'src/sale/buckets.ts', why: 'bucket ids placed on distinct masters, the home bucket' },
    { path: 'src/orders/escrow.ts', why: 'a dry home bucket refilled from the fullest' },
    { path: 'src/redis/scripts/move-out-4.lua', why: 'the rights leave the source, logged' },
    { path: 'src/redis/scripts/move-in-4.lua', why: 'they land once per transfer id' },
    { path: 'src/redis/scripts/move-done-3.lua', why: "the source's record closed" },
    SHARD_SALE,
  ];
}
