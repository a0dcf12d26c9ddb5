/**
 * The fault suite: real app processes, real redis-server processes, real signals,
 * under load from the bench's load generator; the verdict comes from Redis itself.
 * Every scenario waits for states (a process stopped by its own fault hook, answers
 * counted), never for a lucky moment, so each line is the same on every run.
 *
 *   npm run faults                      every scenario at full size
 *   npm run faults -- --quick           the CI subset with smaller sales (what `npm test` runs)
 *   npm run faults -- lost-reply partition-lock    scenarios by name, or every strategy of one
 *   npm run faults -- --only killed,paused-fenced  the same, comma-separated
 *   npm run faults -- cluster-slot-moved cluster-failover   the Redis Cluster faults
 *   npm run faults -- cluster-buckets   the same faults for one product in escrow buckets (bucketed.ts)
 *   Every OUTCOME_UNKNOWN must be resolved by its retry with the same Idempotency-Key
 *   (the order back if it was written, one purchase if not); --no-check-retries (or
 *   FAULTS_CHECK_RETRIES=0) only reports it.
 *
 * One line per scenario: name, requests, 201s, 5xx, sold, stock left, invariants,
 * what happened, and the sale judged as a history (bench/history/: the peak held, each
 * check's state). Exit 1 if any scenario breaks a promise it must keep.
 */
import { parseArgs } from 'node:util';
import { runToExit } from '../entry-point';
import { emit } from '../events';
import { delayedWrite } from './delayed-write';
import { DOOR_FAULTS } from './door';
import { falseRefusalAtDoor } from './door-false-refusal';
import { failover } from './failover';
import { gracefulFailover } from './graceful-failover';
import { holderKilled } from './holder-killed';
import { holderPaused } from './holder-paused';
import { bucketFailover, bucketMoveKilled, bucketSlotMoved } from './bucketed';
import { Context, fiveXx, n, Outcome } from './kit';
import { lostReply } from './lost-reply';
import { NetworkStrategy } from './network-stage';
import { partition } from './partition';
import { redisPaused } from './redis-paused';
import { redisRestarted } from './redis-restarted';
import { redisTimeout } from './redis-timeout';
import { redisUnreachable } from './redis-unreachable';
import { redlockNodes } from './redlock-nodes';
import { setNxDelayed } from './set-nx-delayed';
import { payVersusExpiry, postgresDown, redisRestartedSettling, settlerKilled, sweeperKilled } from './settlement';
import { slotMoved } from './slot-moved';
import { wholeSale } from './whole-sale';

type Scenario = (ctx: Context) => Promise<Outcome | Outcome[]>;

const PROCESS_FAULTS: Record<string, Scenario> = {
  killed: holderKilled,
  'paused-lock': (ctx) => holderPaused(ctx, 'lock'),
  'paused-fenced': (ctx) => holderPaused(ctx, 'fenced'),
  'redis-restarted': redisRestarted,
  'redis-paused': redisPaused,
  redlock: redlockNodes,
};

/**
 * Network faults between each app and Redis (a TCP proxy per app), each for the
 * default strategy and the lock-free two; plain `lock` too where a late write is
 * its lesson, and for the SET NX it sends.
 */
const SAFE: NetworkStrategy[] = ['fenced', 'atomic', 'optimistic'];
const NETWORK: [string, (ctx: Context, strategy: NetworkStrategy) => Promise<Outcome>, NetworkStrategy[]][] = [
  ['lost-reply', lostReply, SAFE],
  ['unreachable', redisUnreachable, SAFE],
  ['partition', partition, ['lock', ...SAFE]],
  ['timeout', redisTimeout, SAFE],
  ['delayed-write', delayedWrite, ['lock', ...SAFE]],
  ['set-nx-delayed', setNxDelayed, ['lock', ...SAFE]],
];
const NETWORK_FAULTS: Record<string, Scenario> = Object.fromEntries(
  NETWORK.flatMap(([name, scenario, strategies]) =>
    strategies.map((strategy) => [`${name}-${strategy}`, (ctx: Context) => scenario(ctx, strategy)]),
  ),
);

/**
 * Faults of a Redis Cluster: a product's slot moved to another master mid-sale; a master
 * killed and its replica taking over; a planned CLUSTER FAILOVER under load.
 */
const CLUSTER_FAULTS: Record<string, Scenario> = {
  ...Object.fromEntries(
    (['lock', ...SAFE] as NetworkStrategy[]).map((strategy) => [
      `cluster-slot-moved-${strategy}`,
      (ctx: Context) => slotMoved(ctx, strategy),
    ]),
  ),
  'cluster-failover-fenced': (ctx) => failover(ctx, 'fenced'),
  'cluster-failover-fenced-wait': (ctx) => failover(ctx, 'fenced-wait'),
  ...Object.fromEntries(
    (['lock', ...SAFE] as NetworkStrategy[]).map((strategy) => [
      `cluster-failover-graceful-${strategy}`,
      (ctx: Context) => gracefulFailover(ctx, strategy),
    ]),
  ),
  // One product in escrow buckets on the 3 masters (bench/faults/bucketed.ts): the same faults while rights move.
  'cluster-buckets-failover-graceful': bucketFailover,
  'cluster-buckets-slot-moved': bucketSlotMoved,
  'cluster-buckets-killed-mid-move': bucketMoveKilled,
};

/** Behind the sale: settlement into PostgreSQL and the reservations' afterlife (bench/faults/settlement.ts). */
const SETTLEMENT_FAULTS: Record<string, Scenario> = {
  'settle-killed-after-commit': (ctx) => settlerKilled(ctx, 'settle-before-ack'),
  'settle-killed-before-commit': (ctx) => settlerKilled(ctx, 'settle-before-commit'),
  'settle-postgres-stopped': (ctx) => postgresDown(ctx, 'stopped'),
  'settle-postgres-paused': (ctx) => postgresDown(ctx, 'paused'),
  'settle-redis-restarted': redisRestartedSettling,
  'settle-pay-vs-expiry': payVersusExpiry,
  'settle-sweeper-killed': sweeperKilled,
};

const SCENARIOS: Record<string, Scenario> = {
  ...PROCESS_FAULTS,
  ...DOOR_FAULTS,
  'door-false-refusal': falseRefusalAtDoor,
  ...NETWORK_FAULTS,
  ...CLUSTER_FAULTS,
  ...SETTLEMENT_FAULTS,
  // Every stage at once: a window, a waiting room, the afterlife, an app killed and PostgreSQL stopped.
  'whole-sale': wholeSale,
};

/** Every scenario's name, in the order the full suite runs them: what the lab offers. */
export const SCENARIO_NAMES: readonly string[] = Object.keys(SCENARIOS);

/**
 * What `--quick` runs: every process fault, the network faults CI needs (a lost
 * reply, a delayed write) and a slot moved mid-sale on a cluster, for the default
 * strategy, and the door's trust window (a false refusal the history checker must
 * name, in a real run); each a few seconds, none timed.
 */
const QUICK = [
  ...Object.keys(PROCESS_FAULTS),
  'lost-reply-fenced',
  'delayed-write-fenced',
  'cluster-slot-moved-fenced',
  'door-false-refusal',
];

/** Scenario names for a name given on the command line: itself, or every strategy of it (`lost-reply`). */
function expand(name: string): string[] {
  if (name in SCENARIOS) return [name];
  return Object.keys(SCENARIOS).filter((key) => key.startsWith(`${name}-`));
}

export function formatLine(o: Outcome): string {
  const load = o.load;
  const invariants =
    o.problems.length > 0
      ? `BROKEN: ${o.problems.join('; ')}`
      : o.lesson
        ? `hold except ${o.lesson}`
        : o.oversold
          ? 'hold except noOversell, which plain lock cannot keep here (no fence)'
          : 'hold';
  return (
    `${o.problems.length === 0 ? 'PASS' : 'FAIL'} ${o.name}: ${n(load.sent)} requests, ${n(load.status['201'] ?? 0)} × 201, ` +
    `${n(fiveXx(load))} × 5xx, sold ${n(o.sold)}, stock left ${n(o.left)}, invariants ${invariants} — ${o.story}` +
    (o.history ? `; ${o.history}` : '')
  );
}

/** The scenario's verdict for the lab (bench/events.ts): the line, and its parts. */
function emitOutcome(o: Outcome): void {
  emit({
    type: 'outcome',
    name: o.name,
    pass: o.problems.length === 0,
    line: formatLine(o),
    problems: o.problems,
    ...(o.lesson && { lesson: o.lesson }),
    sold: o.sold,
    left: o.left,
    ...(o.oversold !== undefined && { oversold: o.oversold }),
    story: o.story,
    ...(o.history && { history: o.history }),
  });
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    args: process.argv.slice(2),
    options: {
      quick: { type: 'boolean', default: false },
      only: { type: 'string' },
      // On by default since the app honours Idempotency-Key; off only to see a strategy's raw behaviour.
      'no-check-retries': { type: 'boolean', default: false },
    },
    allowPositionals: true,
  });
  const asked = [...(values.only ? values.only.split(',') : []), ...positionals];
  const unknown = asked.filter((name) => expand(name).length === 0);
  if (unknown.length > 0) {
    process.stderr.write(`unknown scenario ${unknown.join(', ')}; known: ${Object.keys(SCENARIOS).join(', ')}\n`);
    return 2;
  }
  const names = asked.length > 0 ? [...new Set(asked.flatMap(expand))] : values.quick ? QUICK : Object.keys(SCENARIOS);
  const ctx: Context = {
    quick: values.quick ?? false,
    checkRetries: !(values['no-check-retries'] ?? false) && process.env.FAULTS_CHECK_RETRIES !== '0',
    log: (line) => process.stderr.write(`[faults] ${line}\n`),
  };
  let failed = false;
  for (const name of names) {
    ctx.log(`${name}...`);
    emit({ type: 'scenario', name });
    try {
      const result = await SCENARIOS[name](ctx);
      for (const outcome of [result].flat()) {
        failed ||= outcome.problems.length > 0;
        process.stdout.write(`${formatLine(outcome)}\n`);
        emitOutcome(outcome);
      }
    } catch (err) {
      failed = true;
      process.stdout.write(`FAIL ${name}: ${(err as Error).stack ?? String(err)}\n`);
      // The lab shows it as any failed scenario: a FAIL line and why, not stack frames.
      const why = (err instanceof Error ? err.message : String(err)).trim();
      emit({
        type: 'outcome',
        name,
        pass: false,
        line: `FAIL ${name}: ${why}`,
        problems: [`the scenario failed before its verdict: ${why}`],
        sold: 0,
        left: 0,
        story: `the scenario stopped with an error, so nothing was judged: ${why}`,
      });
    }
  }
  return failed ? 1 : 0;
}

/** Entry point (scripts/faults.js). */
export function cli(): void {
  runToExit(main, {
    failed: (err) => {
      process.stderr.write(`[faults] failed: ${err.stack ?? err.message}\n`);
      return 1;
    },
  });
}
