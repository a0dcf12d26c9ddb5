import { Redis } from 'ioredis';
import { runLoad, type LoadResult } from '../bench/load';
import { startSale } from '../harness/http';
import { type RunningApp, startApp } from '../harness/processes';
import { KeyLayout } from '../src/redis/key-layout';
import { describeWithBrowser, type Page, pageIcon, saveScreenshot } from './helpers/browser';
import { closeClient, startTestRedis, type TestRedis, uniquePrefix } from './helpers/redis';

const TOKEN = 'dashboard-browser-token-0123456789';
const PRODUCT = 'live-sale';
const STOCK = 200;

/** The number an element shows, as the page writes it (toLocaleString('en-US')). */
async function shown(page: Page, selector: string): Promise<number> {
  const text = ((await page.textContent(selector)) ?? '').trim();
  const n = Number(text.replace(/,/g, ''));
  if (text === '' || !Number.isFinite(n)) throw new Error(`${selector} shows "${text}", not a number`);
  return n;
}

/** Answers the two loads got with `code`, together. */
const total = (loads: LoadResult[], code: string) => loads.reduce((sum, l) => sum + (l.codes[code] ?? 0), 0);

/**
 * The page at `/` in headless Chromium, open on one of two app instances that share
 * one Redis while both sell the same product: it must follow the sale to sold out and
 * then show what Redis holds and what the buyers were told, every instance's share
 * included.
 */
describeWithBrowser('dashboard in Chromium during a real sale', (browser) => {
  jest.setTimeout(120_000);
  let redis: TestRedis;
  let admin: Redis;
  const apps: RunningApp[] = [];
  const prefix = uniquePrefix('dashboard-browser');

  beforeAll(async () => {
    redis = await startTestRedis();
    admin = new Redis(redis.url);
    const env = {
      REDIS_URL: redis.url,
      ADMIN_TOKEN: TOKEN,
      KEY_PREFIX: prefix,
      LOCK_STRATEGY: 'lock',
      LOG_LEVEL: 'warn',
    };
    apps.push(...(await Promise.all([startApp({ env }), startApp({ env })])));
  });

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.stop()));
    await closeClient(admin);
    await redis?.stop();
  });

  it('shows the sale sold out, with the numbers Redis holds and each instance its share', async () => {
    await startSale(apps[0].url, TOKEN, PRODUCT, STOCK);
    const page = await browser().newPage({ viewport: { width: 1280, height: 1000 } });
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    page.on('response', (res) => {
      if (res.status() >= 400) errors.push(`${res.status()} ${res.url()}`);
    });
    await page.goto(`${apps[0].url}/?product=${PRODUCT}`);
    expect(await pageIcon(page)).toEqual({ status: 200, type: 'image/svg+xml' });
    await page.waitForSelector('#sale-state[data-state="on-sale"]');
    expect(await shown(page, '#initial-stock')).toBe(STOCK);
    expect(await shown(page, '#stock-left')).toBe(STOCK);

    // Both instances sell while the page watches the first; distinct buyers on each.
    const loads = await Promise.all(
      apps.map((app, i) =>
        runLoad({
          url: app.url,
          productId: PRODUCT,
          buyers: 1_000,
          duplicates: 0,
          connections: 40,
          quantity: 1,
          userPrefix: `i${i}-`,
        }),
      ),
    );
    expect(total(loads, 'CREATED')).toBe(STOCK);

    await page.waitForSelector('#sale-state[data-state="sold-out"]');
    // The instances publish their counts four times a second: wait until every answer is in.
    const answered = total(loads, 'CREATED') + total(loads, 'SOLD_OUT');
    expect(answered).toBe(2_000);
    await page.waitForFunction(
      ({ created, soldOut }) => {
        // Runs in the page (this file is compiled without the DOM's types).
        const doc = (globalThis as any).document;
        const count = (code: string) =>
          Number(doc.querySelector(`#answers tr[data-code="${code}"] td.count`)?.textContent?.replace(/,/g, ''));
        return count('CREATED') === created && count('SOLD_OUT') === soldOut;
      },
      { created: total(loads, 'CREATED'), soldOut: total(loads, 'SOLD_OUT') },
    );

    // What Redis holds.
    const keys = new KeyLayout(prefix).product(PRODUCT);
    const [stockLeft, orders] = await Promise.all([admin.get(keys.stock), admin.xlen(keys.orders)]);
    expect(await shown(page, '#stock-left')).toBe(Number(stockLeft));
    expect(Number(stockLeft)).toBe(0);
    expect(await shown(page, '#units-held')).toBe(orders);
    expect(orders).toBe(STOCK);
    expect(await shown(page, '#orders-written')).toBe(await admin.hlen(keys.states));
    expect(await shown(page, '#orders-reserved')).toBe(await admin.zcard(keys.deadlines));
    expect(await shown(page, '#orders-written')).toBe(STOCK);
    expect(await shown(page, '#waiting')).toBe(0);
    expect(await shown(page, '#lost-locks')).toBe(0);
    // One bucket: the count, and no table of buckets.
    expect(await shown(page, '#buckets')).toBe(1);
    expect(await page.isHidden('#buckets-table')).toBe(true);

    // Every instance, with the 201s it answered itself.
    const rows = await page.$$eval('#instances tr[data-instance]', (trs) =>
      trs.map((tr) => ({
        pid: Number(tr.querySelector('.pid')?.textContent),
        answers: Number(tr.querySelector('.answers')?.textContent?.replace(/,/g, '')),
        share: tr.querySelector('.share')?.textContent ?? '',
      })),
    );
    expect(rows.map((r) => r.pid).sort()).toEqual(apps.map((a) => a.pid).sort());
    for (const [i, app] of apps.entries()) {
      const row = rows.find((r) => r.pid === app.pid)!;
      expect(row.answers).toBe(1_000);
      // Its 201s as a share of all, as the page rounds it (one decimal).
      const share = Math.round(((loads[i].codes.CREATED ?? 0) / STOCK) * 1000) / 10;
      expect(row.share).toBe(`${share.toLocaleString('en-US')}%`);
    }

    // Each chart has something drawn on it.
    const drawn = await page.$$eval('canvas', (canvases) =>
      canvases.map((c) => {
        const data = (c as any).getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let inked = 0;
        for (let p = 3; p < data.length; p += 4) if (data[p] > 0) inked++;
        return { id: c.id, inked };
      }),
    );
    expect(drawn.map((d) => d.id).sort()).toEqual(['chart-answers', 'chart-orders', 'chart-stock']);
    for (const d of drawn) expect({ id: d.id, inked: d.inked > 1_000 }).toEqual({ id: d.id, inked: true });
    await saveScreenshot(page, 'dashboard');

    // Units come back (ten buyers cancel): the same sale, stock up and units held down,
    // its charts going on from the start of the sale, not started again.
    const heldLine = () =>
      page.evaluate(() =>
        (globalThis as any).Chart.getChart('chart-stock').data.datasets[1].data.map((p: { y: number }) => p.y),
      );
    expect((await heldLine())[0]).toBe(0);
    const cancelled = (await admin.hkeys(keys.states)).slice(0, 10);
    for (const id of cancelled) {
      const res = await fetch(`${apps[1].url}/api/orders/${id}/cancel`, { method: 'POST' });
      expect(res.status).toBe(200);
    }
    await page.waitForFunction(() => (globalThis as any).document.querySelector('#stock-left')?.textContent === '10');
    expect(await shown(page, '#units-held')).toBe(STOCK - 10);
    expect(await shown(page, '#orders-written')).toBe(STOCK);
    expect(await shown(page, '#orders-reserved')).toBe(STOCK - 10);
    expect(await page.getAttribute('#sale-state', 'data-state')).toBe('on-sale');
    const held = await heldLine();
    expect([held[0], held.at(-1)]).toEqual([0, STOCK - 10]);
    expect(errors).toEqual([]);
  });

  it('shows a product sold from 3 escrow buckets: their count, their sums, and each bucket as the admin view has it', async () => {
    await startSale(apps[0].url, TOKEN, 'split', 30, 1, undefined, { buckets: 3 });
    const page = await browser().newPage({ viewport: { width: 1280, height: 1000 } });
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    await page.goto(`${apps[0].url}/?product=split`);
    await page.waitForSelector('#sale-state[data-state="on-sale"]');
    expect(await shown(page, '#buckets')).toBe(3);
    expect(await shown(page, '#initial-stock')).toBe(30);
    // More buyers than units, on both instances: dry buckets take rights from the others.
    const loads = await Promise.all(
      apps.map((app, i) =>
        runLoad({
          url: app.url,
          productId: 'split',
          buyers: 30,
          duplicates: 0,
          connections: 10,
          quantity: 1,
          userPrefix: `s${i}-`,
        }),
      ),
    );
    expect(total(loads, 'CREATED')).toBe(30);
    await page.waitForSelector('#sale-state[data-state="sold-out"]');
    expect(await shown(page, '#units-held')).toBe(30);
    expect(await shown(page, '#orders-written')).toBe(30);
    const each = (await (
      await fetch(`${apps[0].url}/api/products/split/buckets`, { headers: { authorization: `Bearer ${TOKEN}` } })
    ).json()) as { id: string; initialStock: number; stock: number; orders: number; inFlight: number }[];
    const rows = () =>
      page.$$eval('#buckets-table tr[data-bucket]', (trs) =>
        trs.map((tr) => {
          const n = (cell: string) => Number(tr.querySelector(cell)?.textContent?.replace(/,/g, ''));
          return {
            id: tr.getAttribute('data-bucket'),
            initialStock: n('.initial'),
            stock: n('.stock'),
            orders: n('.orders'),
            inFlight: n('.in-flight'),
            lock: tr.querySelector('.lock')?.textContent,
          };
        }),
      );
    expect(await page.isVisible('#buckets-table')).toBe(true);
    // Each bucket's own lock, free once the sale is over.
    expect(await rows()).toEqual(
      each.map(({ id, initialStock, stock, orders, inFlight }) => ({
        id,
        initialStock,
        stock,
        orders,
        inFlight,
        lock: 'free',
      })),
    );
    expect(each.reduce((sum, b) => sum + b.orders, 0)).toBe(30);
    expect(errors).toEqual([]);
    await page.close();
  });
});
