import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expectCost, expectRounded, listening, ports, runBench, useBenchDir } from './helpers/bench';
import { useTestRedis } from './helpers/redis';

const ROOT = join(__dirname, '..');
const BENCH = join(ROOT, 'scripts', 'bench.js');

/**
 * `npm run bench`'s options end to end at a tiny size: real processes, real Redis, the
 * report read back from the JSON file it writes. None of these sales needs a race to be
 * won or lost (bench.e2e-spec.ts has those), so the file runs beside others.
 */
describe('bench (scripts/bench.js): its options', () => {
  jest.setTimeout(120_000);
  const benchDir = useBenchDir();
  const redis = useTestRedis();

  it("--redis URL sells on that Redis and leaves nothing of its rows there, a key of its own included, nor its catalog, nor settlement's or the loops' keys", async () => {
    const admin = redis.client();
    await admin.set('canary', 'theirs');
    const out = join(benchDir(), 'redis.json');
    const args = [
      '--redis',
      redis.url(),
      '--settle',
      'off,on',
      '--strategy',
      'lock',
      '--buyers',
      '300',
      '--stock',
      '30',
    ];
    const { report } = runBench([...args, '--catalog', '3', '--connections', '20', '--warmup', '0'], out, 60_000);
    expect(report.rows.map((r: { label: string }) => r.label)).toEqual([
      'lock settle-off',
      'lock settle-off catalog-3',
      'lock',
      'lock catalog-3',
    ]);
    for (const row of report.rows) expect(row).toMatchObject({ pass: true, sold: 30 });
    expect(report.rows[3]).toMatchObject({ catalog: { products: 3, listed: 3 }, settlement: { rows: 30 } });
    expect(await admin.keys('*')).toEqual(['canary']);
  });

  it("--buckets 1,3 --skew 0.9 on one Redis: a row per bucket count, each judged over every bucket (history, settlement), the moves reported, every bucket's keys removed", async () => {
    const admin = redis.client();
    // The file's Redis is shared: what its earlier tests left (a canary) must be all there is after.
    const before = (await admin.keys('*')).sort();
    const out = join(benchDir(), 'buckets.json');
    const { run, report } = runBench(
      [
        '--redis',
        redis.url(),
        '--strategy',
        'fenced',
        '--buckets',
        '1,3',
        '--skew',
        '0.9',
        '--buyers',
        '600',
        '--stock',
        '60',
        '--connections',
        '20',
        '--warmup',
        '0',
      ],
      out,
      90_000,
    );
    const [one, three] = report.rows;
    expect(report.rows.map((r: { label: string }) => r.label)).toEqual(['fenced', 'fenced buckets-3']);
    expect(one).not.toHaveProperty('buckets');
    // Every invariant, the history checker's over the merged streams and settled included.
    for (const row of report.rows) {
      expect(row).toMatchObject({ pass: true, sold: 60, stockLeft: 0, settle: true, settlement: { rows: 60 } });
      expect(Object.entries(row.invariants).filter(([, ok]) => ok !== true)).toEqual([]);
      expect(row.invariants).toMatchObject({ history: true, settled: true });
      expect(row.history).toMatchObject({ holds: true, orders: 60, peak: { units: 60 } });
      expect(row.cost.measured.sold).toBe(60);
    }
    // Of the 60 buyers b0..b59 (the tenth not skewed), 13 have bucket 2 as their home and it
    // holds 20 units: the sale sold out, so rights left it in at least one move.
    expect(three.buckets).toMatchObject({ count: 3, ids: ['hot', 'hot~1', 'hot~2'], cluster: false, skew: 0.9 });
    expect(three.buckets.moves).toBeGreaterThanOrEqual(1);
    expect(run.stdout).toContain(
      `\nbuckets: fenced buckets-3: 3 buckets (hot, hot~1, hot~2) on one Redis server (no --cluster: one thread serves ` +
        `every bucket); ${three.buckets.moves} move${three.buckets.moves === 1 ? '' : 's'} of rights into them; ` +
        `--skew 0.9: 90% of the buyers chosen with bucket 0 (hot) as their home`,
    );
    const html = readFileSync(out.replace(/\.json$/, '.html'), 'utf8');
    expect(html).toContain('<ul id="buckets">');
    expect(html).toContain('fenced buckets-3: 3 buckets (hot, hot~1, hot~2)');
    // The clean-up removed every bucket's keys, not only the product's own.
    expect((await admin.keys('*')).sort()).toEqual(before);
  });

  it("--buckets 3 with more units than buyers: the cost's units sold and the stock left count every bucket", () => {
    const out = join(benchDir(), 'buckets-left.json');
    const { report } = runBench(
      [
        '--strategy',
        'fenced',
        '--buckets',
        '3',
        '--settle',
        'off',
        '--buyers',
        '30',
        '--stock',
        '60',
        '--connections',
        '5',
        '--warmup',
        '0',
      ],
      out,
      60_000,
    );
    // 20 units a bucket; of b0..b29, 15 have bucket 0 as their home, 9 bucket 1, 6 bucket 2:
    // no bucket runs dry, and 30 units are left, 5 of them in bucket 0.
    const [row] = report.rows;
    expect(row).toMatchObject({ label: 'fenced settle-off buckets-3', pass: true, sold: 30, stockLeft: 30 });
    expect(row.buckets).toMatchObject({ count: 3, moves: 0 });
    expect(row.cost.measured.sold).toBe(30);
  });

  it("--catalog 50 runs each row without, then with 50 idle products listed (read back from Redis's products set): the with/without throughput ratio, and each settling row's order lag percentiles", () => {
    const out = join(benchDir(), 'catalog.json');
    const { run, report } = runBench(
      [
        '--strategy',
        'fenced',
        '--catalog',
        '50',
        '--buyers',
        '300',
        '--stock',
        '30',
        '--connections',
        '20',
        '--warmup',
        '0',
      ],
      out,
      90_000,
    );
    const [without, withCatalog] = report.rows;
    expect(report.rows).toHaveLength(2);
    expect(without).toMatchObject({ label: 'fenced', settle: true, pass: true, sold: 30 });
    expect(without).not.toHaveProperty('catalog');
    expect(without).not.toHaveProperty('vsNoCatalog');
    expect(withCatalog).toMatchObject({
      label: 'fenced catalog-50',
      settle: true,
      pass: true,
      sold: 30,
      catalog: { products: 50, listed: 50 },
    });
    expectRounded(withCatalog.vsNoCatalog.throughput, withCatalog.throughput / without.throughput, 2);
    for (const row of report.rows) {
      const lag = row.settlement.orderLag;
      // Every order of the sale, its entry and its insert on this machine's one clock.
      expect(lag).toMatchObject({ orders: 30, clock: 'one machine' });
      for (const ms of [lag.p50, lag.p99, lag.max]) expect(Number.isFinite(ms)).toBe(true);
      // An order reaches PostgreSQL after its entry was written, and the percentiles are in order.
      expect(0 <= lag.p50 && lag.p50 <= lag.p99 && lag.p99 <= lag.max).toBe(true);
    }
    expect(run.stdout).toMatch(
      /\ncatalog: fenced catalog-50 served [\d,]+ req\/s with 50 idle products listed \(through the admin API in [\d,]+ ms; 50 in Redis's products set\); fenced without them [\d,]+: with\/without throughput [\d.]+x \(same run; goal >= 0\.95x\)/,
    );
    expect(run.stdout).toMatch(
      /\nsettlement lag: fenced catalog-50 p50 [\d.]+ ms, p99 [\d.]+ ms, max [\d.]+ ms from each of 30 orders'/,
    );
    expect(run.stdout).toContain("Redis's and PostgreSQL's clocks are one machine's");
  });

  it('--telemetry on,off runs each strategy with TELEMETRY on and off, and states the off/on throughput ratio', () => {
    const out = join(benchDir(), 'telemetry.json');
    const { run, report } = runBench(
      [
        '--strategy',
        'lock',
        '--telemetry',
        'on,off',
        '--buyers',
        '1000',
        '--stock',
        '20',
        '--connections',
        '50',
        '--warmup',
        '0',
      ],
      out,
      60_000,
    );
    const [on, off] = report.rows;
    expect(on).toMatchObject({ strategy: 'lock', label: 'lock', telemetry: true, pass: true, sold: 20 });
    expect(on).not.toHaveProperty('vsTelemetryOn');
    expect(off).toMatchObject({
      strategy: 'lock',
      label: 'lock telemetry-off',
      telemetry: false,
      pass: true,
      sold: 20,
    });
    expectRounded(off.vsTelemetryOn.throughput, off.throughput / on.throughput, 2);
    expect(run.stdout).toContain('| lock telemetry-off | PASS |');
    expect(run.stdout).toMatch(
      /telemetry: lock telemetry-off served [\d,]+ req\/s, with it on [\d,]+: off\/on throughput [\d.]+x \(same run\)/,
    );
    expect(existsSync(join(benchDir(), 'telemetry.html'))).toBe(true);
  });

  it('--auth off,es256 runs a row with buyer tokens: every buyer sends its own, and the cost table prices them', () => {
    const out = join(benchDir(), 'auth.json');
    const { run, report } = runBench(
      [
        '--strategy',
        'fenced',
        '--auth',
        'off,es256',
        '--settle',
        'off',
        '--buyers',
        '1000',
        '--stock',
        '20',
        '--connections',
        '50',
        '--warmup',
        '200',
      ],
      out,
      60_000,
    );
    const [off, es256] = report.rows;
    expect(off).toMatchObject({ label: 'fenced settle-off', pass: true, sold: 20 });
    expect(off).not.toHaveProperty('auth');
    // Every token verified and bought as its buyer: no refusal at the door.
    expect(es256).toMatchObject({ label: 'fenced settle-off auth-es256', auth: 'es256', pass: true, sold: 20 });
    expect(es256.codes).toEqual({ CREATED: 20, SOLD_OUT: 980 });
    expectCost(es256, 20);
    expect(run.stdout).toMatch(/\| fenced settle-off auth-es256 \| [\d.,]+ \|/);
  });

  it("--queue off,10 sells through the waiting room: joins, reads and purchases with passes, every order an admitted buyer's (from Redis), its app CPU per request beside the row without", () => {
    const out = join(benchDir(), 'queue.json');
    const { run, report } = runBench(
      [
        '--strategy',
        'fenced',
        '--queue',
        'off,10',
        '--settle',
        'off',
        '--buyers',
        '100',
        '--stock',
        '20',
        '--connections',
        '50',
        '--warmup',
        '50',
      ],
      out,
      60_000,
    );
    const [off, queued] = report.rows;
    expect(off).toMatchObject({ label: 'fenced settle-off', pass: true, sold: 20 });
    expect(off).not.toHaveProperty('queue');
    expect(queued).toMatchObject({ label: 'fenced settle-off queue-10/s', pass: true, sold: 20 });
    expect(queued.invariants.queue).toBe(true);
    // Its purchases are the history's requests (a join or a ticket read buys nothing): every order written inside one.
    expect(queued.invariants.history).toBe(true);
    expect(queued.history).toMatchObject({
      holds: true,
      orders: 20,
      peak: { units: 20 },
      checks: { outsideWrites: 'pass', falseRefusals: 'pass', ordersOnce: 'pass' },
    });
    // Every buyer joined once; 20 were admitted and bought; the rest were told it is sold out.
    expect(queued.queue).toMatchObject({
      admitPerSecond: 10,
      joins: 100,
      purchases: 20,
      admitted: 20,
      turnedAway: 80,
    });
    expect(queued.codes.CREATED).toBe(20);
    // 10 a second: the second ten were admitted while they waited, and learnt it by reading their tickets.
    expect(queued.queue.reads).toBeGreaterThan(0);
    expect(queued.codes.QUEUE_ADMITTED).toBe(20);
    // Each of the other 80 was told so once: a join refused SOLD_OUT or a ticket read sold_out.
    expect((queued.codes.SOLD_OUT ?? 0) + (queued.codes.QUEUE_SOLD_OUT ?? 0)).toBe(80);
    expect(queued.requests).toBe(100 + queued.queue.reads + 20);
    expectCost(queued, 20);
    expect(queued.vsNoQueue.appCpuPerRequest).toBeGreaterThan(0);
    expect(run.stderr).toMatch(
      /fenced settle-off queue-10\/s: app CPU per request [\d.]+x the same sale's without a waiting room/,
    );
    expect(run.stderr).toMatch(/every order an admitted buyer's/);
    // Both figures as measured: the row without the queue's own, not one worked back from the rounded ratio.
    expect(run.stderr).toContain(
      `(${queued.cost.appCpuUsPerRequest.toFixed(1)} vs ${off.cost.appCpuUsPerRequest.toFixed(1)} µs; ${queued.requests.toLocaleString('en-US')} requests vs 100)`,
    );
  });

  it("--pay judges the whole history: both waves' requests, the returns, and PostgreSQL's rows once settled; with --buckets 3 over every bucket", () => {
    const out = join(benchDir(), 'pay.json');
    const { run, report } = runBench(
      [
        '--strategy',
        'atomic',
        '--pay',
        '0.5',
        // Long enough for the second wave's payments: its load ends on autocannon's next one-second tick.
        '--payment-timeout',
        '3000',
        '--buckets',
        '1,3',
        '--buyers',
        '300',
        '--stock',
        '30',
        '--connections',
        '50',
        '--warmup',
        '0',
      ],
      out,
      90_000,
    );
    expect(report.rows.map((r: { label: string }) => r.label)).toEqual(['atomic', 'atomic buckets-3']);
    for (const row of report.rows) {
      const { unitsReturned, secondWave, paid, cancelled, leftToExpire } = row.settlement.afterlife;
      // Units returned in any bucket are counted (they go back to the bucket that sold them).
      expect(unitsReturned).toBeGreaterThan(0);
      expect(secondWave.created).toBe(unitsReturned);
      // Every order of both waves was written inside a request the history has: the second wave's too.
      expect(row).toMatchObject({ pass: true, invariants: { history: true, settled: true } });
      expect(row.history).toMatchObject({
        holds: true,
        peak: { units: 30 },
        orders: row.orders,
        returns: cancelled + leftToExpire,
        paid: paid + secondWave.created,
        checks: { outsideWrites: 'pass', falseRefusals: 'pass', returns: 'pass', totalQueue: 'pass' },
      });
    }
    expect(run.stdout).toMatch(/\nhistory: atomic: history holds: peak 30 of 30 held at \+[\d,]+ ms; /);
  });

  it('on Ctrl-C (SIGINT) stops the app and Redis it started', async () => {
    const child = spawn(
      process.execPath,
      [BENCH, '--buyers', '200000', '--connections', '50', '--warmup', '0', '--out', join(benchDir(), 'x.json')],
      {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      child.stderr.on('data', (d) => {
        output += d;
        if (/app up/.test(output)) resolve();
      });
      void exited.then(() => reject(new Error(`bench exited before the app was up:\n${output}`)));
    });
    child.kill('SIGINT');
    expect(await exited).toBe(130);
    expect(output).toContain('SIGINT: stopping everything the bench started');
    const started = [
      ...ports(output, /private Redis at redis:\/\/127\.0\.0\.1:(\d+)/g),
      ...ports(output, /app up .* at http:\/\/127\.0\.0\.1:(\d+)/g),
    ];
    expect(started).toHaveLength(2);
    for (const port of started) expect(await listening(port)).toBe(false);
  });

  it('refuses bad options with exit 2 and the usage', () => {
    const run = spawnSync(process.execPath, [BENCH, '--strategy', 'lock,bogus'], { cwd: ROOT, encoding: 'utf8' });
    expect(run.status).toBe(2);
    expect(run.stderr).toContain('--strategy: unknown "bogus"');
    expect(run.stderr).toContain('usage: npm run bench');
    const soldOut = spawnSync(process.execPath, [BENCH, '--sold-out-path', '--stock', '5'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(soldOut.status).toBe(2);
    expect(soldOut.stderr).toContain('--sold-out-path measures a sold-out product: --stock must be 0, got 5');
    const unsafe = spawnSync(process.execPath, [BENCH, '--sold-out-path', '--strategy', 'fenced,none'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(unsafe.status).toBe(2);
    expect(unsafe.stderr).toContain('none cannot oversell a sold-out product');
  });
});
