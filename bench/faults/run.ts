/**
 * The fault suite: real app processes, real redis-server processes, real signals,
 * under load from the bench's load generator; the verdict comes from Redis itself.
 * Every scenario waits for states (a process stopped by its own fault hook, answers
 * counted), never for a lucky moment, so each line is the same on every run.
 *
 *   npm run faults                      every scenario at full size
 *   npm run faults -- --quick           smaller sales (the subset `npm test` runs)
 *   npm run faults -- --only killed,paused-fenced
 *
 * One line per scenario: name, requests, 201s, 5xx, sold, stock left, invariants,
 * and what happened. Exit 1 if any scenario breaks a promise it must keep.
 */
import { parseArgs } from 'node:util';
import { stopAll } from '../../harness/processes';
import { holderKilled } from './holder-killed';
import { holderPaused } from './holder-paused';
import { Context, fiveXx, n, Outcome } from './kit';
import { redisPaused } from './redis-paused';
import { redisRestarted } from './redis-restarted';
import { redlockNodes } from './redlock-nodes';

const SCENARIOS: Record<string, (ctx: Context) => Promise<Outcome | Outcome[]>> = {
  killed: holderKilled,
  'paused-lock': (ctx) => holderPaused(ctx, 'lock'),
  'paused-fenced': (ctx) => holderPaused(ctx, 'fenced'),
  'redis-restarted': redisRestarted,
  'redis-paused': redisPaused,
  redlock: redlockNodes,
};

export function formatLine(o: Outcome): string {
  const load = o.load;
  const invariants =
    o.problems.length > 0
      ? `BROKEN: ${o.problems.join('; ')}`
      : o.oversold
        ? 'hold except noOversell, which plain lock cannot keep here (no fence)'
        : 'hold';
  return (
    `${o.problems.length === 0 ? 'PASS' : 'FAIL'} ${o.name}: ${n(load.sent)} requests, ${n(load.status['201'] ?? 0)} × 201, ` +
    `${n(fiveXx(load))} × 5xx, sold ${n(o.sold)}, stock left ${n(o.left)}, invariants ${invariants} — ${o.story}`
  );
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: { quick: { type: 'boolean', default: false }, only: { type: 'string' } },
  });
  const names = values.only ? values.only.split(',') : Object.keys(SCENARIOS);
  const unknown = names.filter((name) => !(name in SCENARIOS));
  if (unknown.length > 0) {
    process.stderr.write(`unknown scenario ${unknown.join(', ')}; known: ${Object.keys(SCENARIOS).join(', ')}\n`);
    return 2;
  }
  const ctx: Context = { quick: values.quick ?? false, log: (line) => process.stderr.write(`[faults] ${line}\n`) };
  let failed = false;
  for (const name of names) {
    ctx.log(`${name}...`);
    try {
      const result = await SCENARIOS[name](ctx);
      for (const outcome of [result].flat()) {
        failed ||= outcome.problems.length > 0;
        process.stdout.write(`${formatLine(outcome)}\n`);
      }
    } catch (err) {
      failed = true;
      process.stdout.write(`FAIL ${name}: ${(err as Error).stack ?? String(err)}\n`);
    }
  }
  return failed ? 1 : 0;
}

/** Entry point (scripts/faults.js). */
export function cli(): void {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => void stopAll().finally(() => process.exit(130)));
  }
  main().then(
    async (code) => {
      await stopAll();
      process.exit(code);
    },
    async (err: Error) => {
      process.stderr.write(`[faults] failed: ${err.stack ?? err.message}\n`);
      await stopAll();
      process.exit(1);
    },
  );
}
