import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LOCK_STRATEGY_NAMES } from '../src/config/app-config';
import type { Row } from '../bench/report';
import type { RunEvent } from '../bench/lab/runs';
import { RunningLab, startLab } from '../bench/lab/server';
import { describeWithBrowser, type Page, pageIcon, saveScreenshot } from './helpers/browser';
import { FailingLabs, postRun } from './helpers/lab';

const ROOT = join(__dirname, '..');

/** What a lane shows once its run is done: the verdict, read back from the page. */
interface ShownVerdict {
  pass: string | undefined;
  sold: string | undefined;
  oversold: string | undefined;
  invariants: Record<string, boolean>;
  history: string | undefined;
}

function shownVerdict(page: Page, lane: string): Promise<ShownVerdict> {
  return page.$eval(`#lane-${lane} .verdict`, (box) => ({
    pass: box.getAttribute('data-pass') ?? undefined,
    sold: box.getAttribute('data-sold') ?? undefined,
    oversold: box.getAttribute('data-oversold') ?? undefined,
    invariants: Object.fromEntries(
      [...box.querySelectorAll('[data-invariant]')].map((li) => [
        li.getAttribute('data-invariant'),
        li.getAttribute('data-held') === 'true',
      ]),
    ),
    history: box.querySelector('.history')?.textContent ?? undefined,
  }));
}

/** The shared chart's datasets of one lane, as Chart.js holds them. */
function plotted(page: Page, lane: string): Promise<Record<string, { x: number; y: number }[]>> {
  return page.evaluate((side) => {
    const chart = (globalThis as any).labChart;
    const out: Record<string, { x: number; y: number }[]> = {};
    for (const d of chart.data.datasets)
      if (d.lane === side) out[d.kind] = d.data.map((p: any) => ({ x: p.x, y: p.y }));
    return out;
  }, lane);
}

/**
 * The whole page where the other browser tests save theirs, and for the docs the part
 * a learner looks at: the lanes and the chart, above the lessons.
 */
async function screenshot(page: Page, name: string): Promise<void> {
  await saveScreenshot(page, name);
  await page.evaluate(() => (globalThis as any).scrollTo(0, 0));
  await page.screenshot({ path: join(ROOT, 'docs', `${name}.png`) });
}

/**
 * The lab in headless Chromium, driven as a learner drives it: Run buttons, the live
 * chart, the verdict, a fault's timeline. Every figure the page shows is checked
 * against what the CLI wrote from Redis (its JSON results, its outcome events).
 */
describeWithBrowser('the lab in Chromium', (browser) => {
  jest.setTimeout(240_000);
  let lab: RunningLab;
  let dir: string;
  let page: Page;
  /** A second tab, opened before any run exists: it learns of every run all the same. */
  let watcher: Page;
  const elsewhere: string[] = [];
  const pageErrors: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'seckill-lab-'));
    lab = await startLab({ host: '127.0.0.1', port: 0, allowRemote: false, resultsDir: dir });
    page = await browser().newPage({ viewport: { width: 1300, height: 1000 } });
    page.on('pageerror', (err) => pageErrors.push(err.message));
    // Offline by design: Chart.js and Mermaid come from the lab, never a CDN.
    await page.route('**/*', (route) => {
      const url = route.request().url();
      if (url.startsWith(lab.url)) return route.continue();
      elsewhere.push(url);
      return route.abort();
    });
    await page.goto(lab.url);
    watcher = await browser().newPage({ viewport: { width: 1300, height: 1000 } });
    watcher.on('pageerror', (err) => pageErrors.push(err.message));
    await watcher.goto(lab.url);
  });

  afterAll(async () => {
    await watcher?.close();
    await page?.close();
    await lab?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('names every strategy and draws the docs’ diagrams, fetching nothing from elsewhere', async () => {
    const names = await page.$$eval('.lesson code.name', (codes) => codes.map((c) => c.textContent));
    expect(names).toEqual(expect.arrayContaining([...LOCK_STRATEGY_NAMES]));
    await page.waitForSelector('#strategy-none pre.mermaid svg');
    await page.waitForSelector('#strategy-fenced pre.mermaid svg');
    expect(elsewhere).toEqual([]);
    expect(pageErrors).toEqual([]);
  });

  it('runs none beside fenced on one time axis, and shows the verdicts and the lines the bench read from Redis', async () => {
    for (const [strategy, lane] of [
      ['none', 'left'],
      ['fenced', 'right'],
    ]) {
      const form = `#strategy-${strategy} form.run`;
      await page.fill(`${form} input[name=buyers]`, '400');
      await page.fill(`${form} input[name=stock]`, '50');
      await page.fill(`${form} input[name=connections]`, '40');
      await page.click(`${form} button[value=${lane}]`);
      await page.waitForSelector(`#lane-${lane}[data-run]`);
    }
    for (const lane of ['left', 'right']) {
      await page.waitForSelector(`#lane-${lane}[data-state=done]`, { timeout: 180_000 });
    }
    for (const lane of ['left', 'right']) {
      const run = lab.runs.get(Number(await page.getAttribute(`#lane-${lane}`, 'data-run')))!;
      const row: Row = JSON.parse(readFileSync(run.out!, 'utf8')).rows[0];
      expect(row.strategy).toBe(lane === 'left' ? 'none' : 'fenced');
      // The verdict shown is the bench's, read from Redis: sold, oversold, each invariant.
      expect(await shownVerdict(page, lane)).toEqual({
        pass: String(row.pass),
        sold: String(row.sold),
        oversold: String(row.oversold),
        invariants: row.invariants,
        // The history checker's line, as the bench printed it (none: its peak oversell).
        history: row.history!.line,
      });
      expect(row.history!.line).toMatch(lane === 'left' ? /^history FAILS oversell: peak / : /^history holds: /);
      // The chart: the order stream's line as the bench drew it, and the live line
      // (Redis's stock key, sampled as the sale ran) ending where the sale did.
      const lines = await plotted(page, lane);
      expect(lines.sold).toEqual(row.soldOverTime.map((p) => ({ x: p.ms, y: p.units })));
      expect(lines.live.length).toBeGreaterThan(0);
      expect(lines.live.at(-1)!.y).toBe(row.sold);
      expect(lines.stock.map((p) => p.y)).toEqual([row.stock, row.stock]);
      // Answers by code, as the bench counted them.
      const codes = await page.$$eval(`#lane-${lane} .codes tr`, (trs) =>
        Object.fromEntries(
          trs.map((tr) => [tr.getAttribute('data-code'), Number(tr.lastElementChild!.textContent!.replace(/,/g, ''))]),
        ),
      );
      expect(codes).toEqual(row.codes);
      // Its HTML report, and a place in the session's list.
      const report = await fetch(new URL(`/runs/${run.id}/report`, lab.url));
      expect(report.status).toBe(200);
      expect(await report.text()).toContain('<canvas');
      expect(await page.getAttribute(`#runs tr[data-run="${run.id}"]`, 'data-state')).toBe('done');
    }
    // fenced keeps every promise; none breaks exactly the ones its sale shows broken.
    expect(Object.values((await shownVerdict(page, 'right')).invariants).every(Boolean)).toBe(true);
    await screenshot(page, 'lab');
  });

  it('runs one product on one shard beside one on three shards: each bucket with its master, each shard with its share, the moves, each verdict', async () => {
    // Between the strategies and the faults, each lesson with its Run buttons.
    const parts = await page.$$eval('main h2.part', (hs) => hs.map((h) => h.textContent));
    expect(parts).toEqual(['Strategies', 'Shards', 'Faults']);
    for (const [buckets, lane] of [
      ['1', 'left'],
      ['3', 'right'],
    ]) {
      const form = `#shards-${buckets} form.run`;
      expect(await page.textContent(`#shards-${buckets} code.name`)).toBe(`buckets: ${buckets}`);
      await page.fill(`${form} input[name=buyers]`, '300');
      await page.fill(`${form} input[name=stock]`, '300');
      await page.fill(`${form} input[name=connections]`, '20');
      await page.click(`${form} button[value=${lane}]`);
      await page.waitForSelector(`#lane-${lane}[data-run]`);
    }
    for (const lane of ['left', 'right']) {
      await page.waitForSelector(`#lane-${lane}[data-state=done]`, { timeout: 180_000 });
    }
    for (const [buckets, lane] of [
      [1, 'left'],
      [3, 'right'],
    ] as const) {
      const run = lab.runs.get(Number(await page.getAttribute(`#lane-${lane}`, 'data-run')))!;
      expect(run.request).toEqual({ kind: 'shards', buckets, buyers: 300, stock: 300, connections: 20 });
      expect(await page.textContent(`#lane-${lane} .title`)).toContain(`buckets: ${buckets} on 3 masters`);
      // The steps shown are the run's, in order: where each bucket is, then what each bucket and shard did.
      const steps = run.events.flatMap((e) => (e.type === 'step' ? [e] : []));
      const shown = await page.$$eval(`#lane-${lane} .timeline li`, (lis) =>
        lis.map((li) => ({ step: li.getAttribute('data-step'), text: li.textContent })),
      );
      expect(shown.map((li) => li.step)).toEqual(steps.map((e) => e.step));
      expect(steps.filter((e) => /^bucket \S+$/.test(e.step))).toHaveLength(buckets);
      expect(steps.filter((e) => /^bucket \S+ done$/.test(e.step))).toHaveLength(buckets);
      expect(steps.filter((e) => e.step.startsWith('shard '))).toHaveLength(3);
      for (const [i, e] of steps.entries()) expect(shown[i].text).toContain(e.detail);
      const outcome = run.events.find((e) => e.type === 'outcome') as Extract<RunEvent, { type: 'outcome' }>;
      expect(outcome).toMatchObject({ pass: true, sold: 300, left: 0, problems: [] });
      expect(outcome.story).toMatch(
        buckets === 1 ? /^one bucket on one master: / : /^3 buckets on 3 masters, \d+ moves? \(\d+ units?\) refilling/,
      );
      expect(await page.getAttribute(`#lane-${lane} .verdict`, 'data-pass')).toBe('true');
      expect(await page.textContent(`#lane-${lane} .verdict .story`)).toBe(outcome.story);
      expect(await page.textContent(`#lane-${lane} .verdict .outcome .history`)).toBe(outcome.history);
      // Its live line ended where the buckets did: every unit sold.
      expect((await plotted(page, lane)).live.at(-1)!.y).toBe(300);
    }
    expect(pageErrors).toEqual([]);
  });

  it('runs a fault (a paused holder under fenced) and shows its steps as they happened, then its verdict', async () => {
    const form = '#fault-paused-lock form.run';
    await page.selectOption(`${form} select[name=scenario]`, 'paused-fenced');
    await page.selectOption(`${form} select[name=size]`, 'quick');
    await page.click(`${form} button[value=left]`);
    await page.waitForSelector('#lane-left .title:has-text("paused-fenced")');
    // Live, before the verdict: several points of the sold line, rising, while the run runs.
    const live = await page.waitForFunction(
      () => {
        const lane = (globalThis as any).document.querySelector('#lane-left');
        const chart = (globalThis as any).labChart;
        const line = chart.data.datasets.find((d: any) => d.lane === 'left' && d.kind === 'live');
        const ys: number[] = (line?.data ?? []).map((p: any) => p.y);
        const rising = ys.length >= 3 && ys.every((y, i) => i === 0 || y >= ys[i - 1]) && ys.at(-1)! > ys[0];
        return lane.dataset.state === 'running' && !lane.querySelector('.verdict [data-pass]') && rising ? ys : null;
      },
      undefined,
      { timeout: 180_000 },
    );
    expect(((await live.jsonValue()) as number[]).length).toBeGreaterThanOrEqual(3);
    await page.waitForSelector('#lane-left[data-state=done]', { timeout: 180_000 });
    const run = lab.runs.get(Number(await page.getAttribute('#lane-left', 'data-run')))!;
    const events = run.events.filter(
      (e): e is Extract<RunEvent, { type: 'step' | 'outcome' }> => e.type === 'step' || e.type === 'outcome',
    );
    const steps = await page.$$eval('#lane-left .timeline li', (lis) => lis.map((li) => li.getAttribute('data-step')));
    expect(steps).toEqual([
      'sale started',
      'holder paused',
      'other holder took the lock',
      'holder resumed',
      'late write refused',
    ]);
    expect(steps).toEqual(events.filter((e) => e.type === 'step').map((e) => (e as { step: string }).step));
    // On the chart too, each where the live line was when it happened.
    expect((await plotted(page, 'left')).steps.length).toBe(5);
    const outcome = events.find((e) => e.type === 'outcome') as Extract<RunEvent, { type: 'outcome' }>;
    expect(outcome).toMatchObject({ pass: true, name: 'holder paused (fenced, 2 apps)', problems: [] });
    expect(outcome.line).toMatch(/^PASS holder paused \(fenced, 2 apps\): .*refused by the fence \(STALE_LOCK ×[1-9]/);
    expect(await page.getAttribute('#lane-left .verdict', 'data-pass')).toBe('true');
    expect(await page.textContent('#lane-left .verdict .story')).toBe(outcome.story);
    expect(outcome.history).toMatch(/^history holds: peak /);
    expect(await page.textContent('#lane-left .verdict .outcome .history')).toBe(outcome.history);
    expect(pageErrors).toEqual([]);
    await screenshot(page, 'lab-fault');
  });

  it('shows a scenario that throws as a FAIL line, not stack frames', async () => {
    // No redis-server can start: the scenario throws before its verdict.
    const before = process.env.REDIS_SERVER;
    process.env.REDIS_SERVER = '/bin/false';
    let run;
    try {
      run = lab.runs.submit({ kind: 'fault', scenario: 'paused-lock', size: 'quick' }, 'right');
    } finally {
      if (before === undefined) delete process.env.REDIS_SERVER;
      else process.env.REDIS_SERVER = before;
    }
    await page.waitForSelector(`#lane-right[data-run="${run.id}"][data-state=done]`, { timeout: 60_000 });
    expect(await page.getAttribute('#lane-right .verdict', 'data-pass')).toBe('false');
    expect(await page.textContent('#lane-right .verdict .outcome h4')).toBe('FAIL paused-lock');
    expect(await page.textContent('#lane-right .verdict .invariants-line')).toMatch(
      /^BROKEN: the scenario failed before its verdict: redis-server .* exited/,
    );
    expect(await page.textContent('#lane-right')).not.toMatch(/ at .*\.js:\d+/);
  });

  it('keeps a tab opened before any run up to date: every run once, every step once', async () => {
    const ids = lab.runs.list().map((r) => String(r.id));
    await watcher.waitForFunction(
      (n) => (globalThis as any).document.querySelectorAll('#runs tbody tr[data-state=done]').length === n,
      ids.length,
      { timeout: 30_000 },
    );
    expect(await watcher.$$eval('#runs tbody tr', (trs) => trs.map((tr) => tr.getAttribute('data-run')))).toEqual(ids);
    const fault = lab.runs.list().find((r) => r.request.kind === 'fault' && r.lane === 'left')!;
    expect(await watcher.getAttribute('#lane-left', 'data-run')).toBe(String(fault.id));
    expect(
      await watcher.$$eval('#lane-left .timeline li', (lis) => lis.map((li) => li.getAttribute('data-step'))),
    ).toEqual(fault.events.filter((e) => e.type === 'step').map((e) => (e as { step: string }).step));
    expect(pageErrors).toEqual([]);
  });
});

/**
 * The page beside runs it did not start: one a script started through the API (naming
 * no lane), and a lab restarted on the same port under an open tab.
 */
describeWithBrowser('the lab in Chromium: runs from elsewhere, and a lab restarted under the page', (browser) => {
  jest.setTimeout(60_000);
  const labs = new FailingLabs();
  let page: Page | undefined;
  afterAll(async () => {
    await page?.close();
    await labs.close();
  });

  const rows = (p: Page) => p.$$eval('#runs tbody tr', (trs) => trs.map((tr) => tr.getAttribute('data-run')));

  it("shows a run started through the API in the left lane, and after a restart on the same port the new lab's runs only, with no request failing", async () => {
    const first = await labs.start();
    page = await browser().newPage({ viewport: { width: 1300, height: 1000 } });
    const failures: string[] = [];
    page.on('pageerror', (err) => failures.push(err.message));
    page.on('response', (res) => {
      if (res.status() >= 400) failures.push(`${res.status()} ${res.url()}`);
    });
    await page.goto(first.url);
    expect(await pageIcon(page)).toEqual({ status: 200, type: 'image/svg+xml' });
    await postRun(first);
    await postRun(first);
    await page.waitForSelector('#lane-left[data-run="2"][data-state="failed"]');
    expect(await rows(page)).toEqual(['1', '2']);

    await first.close();
    const second = await labs.start(Number(new URL(first.url).port));
    await postRun(second);
    // The open tab reconnects to the new lab, whose run #1 is not the one it showed.
    await page.waitForSelector('#lane-left[data-run="1"][data-state="failed"]');
    expect(await rows(page)).toEqual(['1']);
    expect(await page.textContent('#lane-left .state')).toMatch(/^failed: the lab failed to run it: ENOTDIR/);
    expect(failures).toEqual([]);
  });
});
