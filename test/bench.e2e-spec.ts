import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { passes } from '../bench/verdict';
import { runBench } from './helpers/bench';

const ROOT = join(__dirname, '..');
const BENCH = join(ROOT, 'scripts', 'bench.js');

/** True while something accepts TCP connections on the port. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** The results the HTML report embeds for its charts and table. */
function embeddedResults(html: string): unknown {
  const json = /<script type="application\/json" id="bench-data">([^]*?)<\/script>/.exec(html);
  expect(json).not.toBeNull();
  return JSON.parse(json![1]);
}

const ports = (output: string, pattern: RegExp) => [...output.matchAll(pattern)].map((m) => Number(m[1]));

/**
 * `shown` is `exact` rounded to `decimals`: within half a step, the edge included
 * (toBeCloseTo's strict bound fails 16.45 shown as 16.5, a rounding it should accept).
 */
function expectRounded(shown: number, exact: number, decimals: number): void {
  expect(Math.abs(shown - exact)).toBeLessThanOrEqual(0.5 * 10 ** -decimals + 1e-9);
}

/**
 * A row's cost figures (bench/cost.ts) are there and make sense: CPU and commands are
 * positive and finite; the per-sale ones exist exactly when something was sold. The
 * bare Fastify route sends Redis nothing, so its Redis figure may be 0 (Redis's idle work).
 */
function expectCost(row: { strategy: string; cost: Record<string, any> }, sold: number): void {
  const { measured, shards, ...figures } = row.cost;
  const perSale = ['redisCpuUsPerSale', 'redisCommandsPerSale', 'salesPerSecCeiling'];
  for (const [name, value] of Object.entries(figures)) {
    const label = `${row.strategy}: cost.${name}`;
    const idle = row.strategy === 'fastify-route' && name === 'redisCpuUsPerRequest';
    if (sold === 0 && perSale.includes(name)) expect({ [label]: value }).toEqual({ [label]: null });
    else expect({ [label]: Number.isFinite(value) && (idle ? value >= 0 : value > 0) }).toEqual({ [label]: true });
  }
  expect(Object.keys(figures).sort()).toEqual(['appCpuUsPerRequest', 'redisCpuUsPerRequest', ...perSale].sort());
  expect(measured.sold).toBe(sold);
  // One Redis server: one shard, with all of the pass's Redis CPU and commands.
  expect(shards).toHaveLength(1);
  expect(shards[0]).toMatchObject({ node: expect.stringMatching(/^127\.0\.0\.1:\d+$/), share: 1 });
  // redisCpuMs is rounded to 0.1 ms (16,450 µs is 16.5).
  expectRounded(measured.redisCpuMs, shards[0].cpuUs / 1000, 1);
  expect(shards[0].commands).toBe(
    Object.values(measured.redisCommands as Record<string, number>).reduce((a, b) => a + b, 0),
  );
}

/**
 * `npm run bench` end to end at a tiny size: real processes, real Redis, the
 * verdict read back from the JSON file it writes.
 */
describe('bench (scripts/bench.js)', () => {
  jest.setTimeout(120_000);
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'seckill-bench-test-'));
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  // 500 connections for a stock of 50: the opening burst is larger than the stock,
  // so the unlocked control's read-check-write races visibly (it oversold by 97 to
  // 228 in four trial runs; with 100 connections it sometimes did not oversell).
  it('proves the lock sells exactly the stock and the unlocked control oversells, then cleans up', async () => {
    const out = join(dir, 'tiny.json');
    const { run, report } = runBench(
      ['--buyers', '3000', '--stock', '50', '--connections', '500', '--warmup', '200', '--strategy', 'lock,none'],
      out,
      110_000,
    );
    const output = `${run.stdout}\n${run.stderr}`;
    expect(report.machine).toMatchObject({
      cpus: expect.any(Number),
      node: process.version,
      redis: expect.stringMatching(/^\d/),
    });
    const [lock, none] = report.rows;

    expect(lock).toMatchObject({
      strategy: 'lock',
      unsafe: false,
      pass: true,
      buyers: 3000,
      requests: 3000,
      stock: 50,
      sold: 50,
      stockLeft: 0,
      orders: 50,
      distinctBuyers: 50,
      oversold: 0,
      errors: 0,
      timeouts: 0,
      invariants: { noOversell: true, noUndersell: true, conservation: true, perUserLimit: true, accounting: true },
    });
    expect(lock.status).toEqual({ '201': 50, '409': 2950 });
    expect(lock.throughput).toBeGreaterThan(0);
    expect(lock.latency.p99).toBeGreaterThanOrEqual(lock.latency.p50);

    // The negative control: the same sale without a lock oversells, and the
    // verdict says so from Redis (stock below zero, more orders than stock).
    expect(none).toMatchObject({ strategy: 'none', unsafe: true, pass: true });
    expect(none.oversold).toBeGreaterThan(0);
    expect(none.stockLeft).toBeLessThan(0);
    expect(none.invariants.noOversell).toBe(false);
    expect(none.orders).toBe(50 + none.oversold);

    expect(run.stdout).toContain('| lock | PASS |');
    expect(run.stdout).toMatch(/verdict: none oversold by \d+/);
    // What the pass cost, in the JSON and in a table of its own after the first.
    expectCost(lock, 50);
    expectCost(none, none.sold);
    expect(lock.cost.measured).toMatchObject({ requests: 3000, sold: 50 });
    expect(run.stdout).toMatch(
      /\n\n\| strategy \| app CPU µs\/req \| Redis CPU µs\/req \|.*\n.*\n\| lock \| [\d.]+ \|/,
    );

    // Units held over time, from the order stream: the lock stops at the stock, at its
    // exact sell-out; the control goes past it.
    expect(lock.soldOverTime[0]).toEqual({ ms: 0, units: 0 });
    expect(lock.soldOverTime).toContainEqual({ ms: lock.sellOutMs, units: 50 });
    expect(lock.soldOverTime[lock.soldOverTime.length - 1].units).toBe(50);
    expect(none.soldOverTime[none.soldOverTime.length - 1].units).toBe(none.sold);
    // Every answer's latency: a rising curve from 0% to the max at 100%.
    const curve = lock.latencyByPercentile as { percentile: number; ms: number }[];
    expect(curve.length).toBeGreaterThan(30);
    expect(curve[0].percentile).toBe(0);
    expect(curve[curve.length - 1].percentile).toBe(100);
    // The same slowest answer: autocannon's histogram truncates it to whole milliseconds,
    // the curve rounds it to hundredths (357.996 is 358 here, 357 there).
    const slowest = curve[curve.length - 1].ms;
    expect(slowest).toBeGreaterThanOrEqual(lock.latency.max);
    expect(slowest).toBeLessThanOrEqual(lock.latency.max + 1);
    expect(curve.every((p, i) => i === 0 || p.ms >= curve[i - 1].ms)).toBe(true);

    // The HTML report beside the JSON, drawing exactly the JSON's figures.
    const html = readFileSync(join(dir, 'tiny.html'), 'utf8');
    expect(embeddedResults(html)).toEqual(report);
    expect(html).toMatch(/<tr data-strategy="none"[^>]*>.*<td class="oversold">\d+<\/td><\/tr>/);
    expect(run.stderr).toContain(`results: ${relative(ROOT, out)}, charts: ${relative(ROOT, join(dir, 'tiny.html'))}`);

    // Each app's dashboard address, for the product its measured sale sells.
    expect(run.stderr).toMatch(/\[bench\] lock: watch it live: http:\/\/127\.0\.0\.1:\d+\/\?product=hot\n/);
    expect(run.stderr).toMatch(/\[bench\] none: watch it live: http:\/\/127\.0\.0\.1:\d+\/\?product=hot\n/);
    // The run ends with the text chart: the stock line, and the control drawn above it.
    const chart = run.stdout.trimEnd().split('\n');
    expect(chart[chart.length - 1]).toContain('● lock   ○ none   ─ stock (50)');
    const plot = chart.filter((l) => l.includes('┤'));
    const stockRow = plot.findIndex((l) => /^\s*50 stock ┤/.test(l));
    expect(stockRow).toBeGreaterThan(0);
    expect(plot.slice(0, stockRow).join('')).toContain('○');

    // Nothing it started is left running.
    const started = [
      ...ports(output, /private Redis at redis:\/\/127\.0\.0\.1:(\d+)/g),
      ...ports(output, /app up .* at http:\/\/127\.0\.0\.1:(\d+)/g),
    ];
    expect(started).toHaveLength(3);
    for (const port of started) expect(await listening(port)).toBe(false);
  });

  // Stock 20 a product and 500 connections: each product's opening burst (about 167
  // connections) is far above its stock, so the unlocked control oversells some product
  // (it did in every run tried), within its three sales.
  it('--products 3 judges each product from Redis on its own, with totals; a product the control oversold fails it as a safe row', () => {
    const out = join(dir, 'products.json');
    const { run, report } = runBench(
      [
        '--products',
        '3',
        '--buyers',
        '3000',
        '--stock',
        '20',
        '--connections',
        '500',
        '--warmup',
        '300',
        '--strategy',
        'lock,none',
      ],
      out,
      110_000,
    );
    const [lock, none] = report.rows;
    expect(lock).toMatchObject({ strategy: 'lock', pass: true, buyers: 3000, requests: 3000, stock: 60 });
    expect(lock.products.map((p: { id: string }) => p.id)).toEqual(['p1', 'p2', 'p3']);
    for (const p of lock.products) {
      // Buyers round-robin: 1,000 each, far more than its stock, so each sells exactly its stock.
      expect(p).toMatchObject({
        stock: 20,
        requests: 1000,
        sold: 20,
        stockLeft: 0,
        orders: 20,
        oversold: 0,
        pass: true,
      });
      expect(p.status).toEqual({ '201': 20, '409': 980 });
      expect(Object.values(p.invariants)).toEqual([true, true, true, true, true, true]);
    }
    // The totals are the products' sums.
    const sum = (rows: { [k: string]: number }[], field: string) => rows.reduce((a, p) => a + p[field], 0);
    for (const field of ['sold', 'stockLeft', 'orders', 'requests', 'stock']) {
      expect({ field, total: field === 'requests' ? lock.requests : lock[field] }).toEqual({
        field,
        total: sum(lock.products, field),
      });
    }
    expect(lock).toMatchObject({ sold: 60, stockLeft: 0, orders: 60, distinctBuyers: 60, oversold: 0 });
    expect(lock.status).toEqual({ '201': 60, '409': 2940 });
    expectCost(lock, 60);

    // The control really oversold, product by product, as Redis says.
    expect(none).toMatchObject({ strategy: 'none', unsafe: true, pass: true });
    const oversold = none.products.filter((p: { oversold: number }) => p.oversold > 0);
    expect(oversold.length).toBeGreaterThan(0);
    for (const p of oversold) {
      expect(p.stockLeft).toBeLessThan(0);
      expect(p.invariants.noOversell).toBe(false);
      expect(p.orders).toBe(20 + p.oversold);
    }
    expect(none.oversold).toBe(sum(none.products, 'oversold'));
    expect(none.invariants.noOversell).toBe(false);
    // Judged as a safe strategy, the row and each oversold product fail; an unsafe one passes by showing it.
    expect(passes(none.invariants, false)).toBe(false);
    for (const p of oversold)
      expect({ id: p.id, pass: p.pass, safe: passes(p.invariants, false) }).toEqual({
        id: p.id,
        pass: true,
        safe: false,
      });

    expect(run.stdout).toMatch(/\| lock \| p1 \| PASS \| 1,000 \| 20 \| 980 \|/);
    expect(run.stdout).toContain(
      'verdict: lock sold 60 of 60 over 3 products to 60 buyers; every invariant holds for each product',
    );
    expect(run.stdout).toMatch(/verdict: none oversold by \d+ in [123] of 3 products/);
    // One Redis server: no per-shard split to show.
    expect(run.stdout).not.toContain('per-shard CPU split');
  });

  it('--telemetry on,off runs each strategy with TELEMETRY on and off, and states the off/on throughput ratio', () => {
    const out = join(dir, 'telemetry.json');
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
    expect(existsSync(join(dir, 'telemetry.html'))).toBe(true);
  });

  it('--auth off,es256 runs a row with buyer tokens: every buyer sends its own, and the cost table prices them', () => {
    const out = join(dir, 'auth.json');
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
    const out = join(dir, 'queue.json');
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

  it('on Ctrl-C (SIGINT) stops the app and Redis it started', async () => {
    const child = spawn(
      process.execPath,
      [BENCH, '--buyers', '200000', '--connections', '50', '--warmup', '0', '--out', join(dir, 'x.json')],
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

  it('--baseline runs the minimal node:http server first and gives every row its ratios to it; --workers 1,2 runs both', () => {
    const out = join(dir, 'baseline.json');
    const { run, report } = runBench(
      [
        '--baseline',
        '--strategy',
        'lock',
        '--workers',
        '1,2',
        '--buyers',
        '1000',
        '--stock',
        '20',
        '--connections',
        '100',
        '--warmup',
        '0',
      ],
      out,
      60_000,
    );
    const [baseline, lock, lock2] = report.rows;
    expect(lock2).toMatchObject({ strategy: 'lock', workers: 2, pass: true, sold: 20, stockLeft: 0 });
    expect(run.stdout).toContain('| lock ×2 | PASS |');
    expect(baseline).toMatchObject({
      strategy: 'baseline',
      pass: true,
      sold: 20,
      stockLeft: 0,
      vsBaseline: { throughput: 1, p99: 1 },
    });
    expect(baseline.status).toEqual({ '201': 20, '409': 980 });
    expect(lock).toMatchObject({ strategy: 'lock', pass: true, sold: 20 });
    expectRounded(lock.vsBaseline.throughput, lock.throughput / baseline.throughput, 2);
    expect(run.stdout).toContain('req/s vs baseline');
    // Each row's cost is its own: the baseline server, one app process, a primary and its two workers.
    for (const row of [baseline, lock, lock2]) expectCost(row, 20);
  });

  it('--sold-out-path runs the raw node:http server and the bare Fastify route first, sells nothing, and gives every row its app CPU ratio to the route', () => {
    const out = join(dir, 'sold-out.json');
    const { run, report } = runBench(
      ['--sold-out-path', '--strategy', 'lock', '--buyers', '2000', '--connections', '50', '--warmup', '200'],
      out,
      60_000,
    );
    const [raw, route, lock] = report.rows;
    expect(raw.strategy).toBe('raw-http');
    for (const row of [raw, route, lock]) {
      expect(row).toMatchObject({ stock: 0, sold: 0, pass: true, status: { '409': 2000 }, codes: { SOLD_OUT: 2000 } });
      expectCost(row, 0);
    }
    expect(route).toMatchObject({ strategy: 'fastify-route', vsFastifyRoute: { appCpuPerRequest: 1 } });
    expect(lock.strategy).toBe('lock');
    expectRounded(
      lock.vsFastifyRoute.appCpuPerRequest,
      lock.cost.appCpuUsPerRequest / route.cost.appCpuUsPerRequest,
      2,
    );
    expect(run.stdout).toContain('app CPU vs fastify-route');
    expect(run.stdout).toMatch(
      /sold-out path: lock spends [\d.]+ µs of app CPU per request, the bare Fastify route [\d.]+ µs: [\d.]+x/,
    );
  });

  it('exits 1 when the none control cannot oversell, after trying three sales', () => {
    // Stock above demand: there is nothing to oversell, so the control must come out blind.
    const out = join(dir, 'blind.json');
    const { run, report } = runBench(
      ['--strategy', 'none', '--buyers', '300', '--stock', '1000', '--connections', '50', '--warmup', '0'],
      out,
      60_000,
      1,
    );
    expect(run.status).toBe(1);
    expect(run.stdout).toContain('verdict: none did NOT oversell');
    expect(run.stderr.match(/did not oversell; running it again/g)).toHaveLength(2);
    const [row] = report.rows;
    expect(row).toMatchObject({ strategy: 'none', attempts: 3, oversold: 0, pass: false });
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
