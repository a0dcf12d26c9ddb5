/**
 * A whole sale as a shop runs it, under faults: a sale window opening a little ahead
 * (by Redis's clock), a waiting room admitting buyers at a rate with single-use passes,
 * buyers who pay, cancel, or let their reservation expire (a short payment deadline),
 * a second wave buying the units that came back; one app of two SIGKILLed during it and
 * PostgreSQL stopped during it (and started again on its data), settlement on. Judged
 * by the history checker, PostgreSQL's rows as its total queue once settlement drained,
 * and by `npm run audit` on the stores.
 *
 * Every step waits for a state, never for a moment: app B stops itself at its
 * KILL_AT_WRITE-th write (FAULT_STOP_AT, its validity checked, nothing written), and is
 * SIGKILLed there, PostgreSQL stopped at that very point; the second wave starts once
 * every reservation of the first is paid, cancelled or expired (the deadlines' set
 * empty), PostgreSQL back first.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { JsonResponse, pay, request } from '../../harness/http';
import { startPrivatePostgres } from '../../harness/postgres';
import { stopAll } from '../../harness/processes';
import { startPrivateRedis } from '../../harness/redis';
import { KeyLayout } from '../../src/redis/key-layout';
import { PAYMENT_SECRET } from '../afterlife';
import type { RequestRecord } from '../history/history';
import type { LoadResult } from '../load';
import { checkSettled, unsettled, waitForSettlement } from '../settled';
import { readSale } from '../verdict';
import { clockAtStart, judgeHistory, readSettled } from './history-verdict';
import {
  apps,
  Context,
  harnessClient,
  n,
  Outcome,
  PREFIX,
  PRODUCT,
  stopsAtWrite,
  tallied,
  timeline,
  TOKEN,
  waitForStop,
  waitUntil,
} from './kit';
import { historyNow } from '../history/clock';

/** App B stops itself at this write, and is killed there: it has sold for a few holds before. */
const KILL_AT_WRITE = 3;
/** A reservation's payment deadline: short, so the expiries come within the sale. */
const PAYMENT_TIMEOUT_MS = 1_500;
/** The sale opens this long after it is set up, by Redis's clock. */
const OPENS_IN_MS = 1_500;
/** How long a buyer keeps at it (joining, reading its ticket) before giving up. */
const PATIENCE_MS = 20_000;

/** The afterlife of a wave-1 order, by its place among the 201s: paid, cancelled, left to expire. */
const FATE = ['pay', 'cancel', 'expire'] as const;

/**
 * The buyers' side of the sale: every purchase request kept as the checker reads them
 * (unanswered: a killed app), every other answer counted by code.
 */
class Shop {
  readonly requests: RequestRecord[] = [];
  readonly codes: Record<string, number> = {};
  readonly status: Record<string, number> = {};
  readonly orderIds: string[] = [];
  readonly fates: Record<string, number> = {};
  private readonly startedAt = Date.now();
  private afterlife = 0;

  constructor(private readonly apps: { url: string; alive: () => boolean }[]) {}

  /** An app that still runs: buyer i's, or the other when it was killed. */
  app(i: number): string {
    const live = this.apps.filter((a) => a.alive());
    return (this.apps[i % this.apps.length].alive() ? this.apps[i % this.apps.length] : live[0]).url;
  }

  /** A purchase: its answer, or null when none came (the app was killed): an outcome unknown. */
  async buy(
    url: string,
    userId: string,
    pass?: string,
  ): Promise<{ status: number; code: string; orderId?: string } | null> {
    const record: { -readonly [K in keyof RequestRecord]: RequestRecord[K] } = {
      userId,
      productId: PRODUCT,
      quantity: 1,
      sentAt: historyNow(),
      answeredAt: null,
      status: null,
      code: null,
    };
    this.requests.push(record);
    const res = await request(url, 'POST', `/api/products/${PRODUCT}/orders`, {
      json: { userId, quantity: 1 },
      headers: pass ? { 'admission-pass': pass } : {},
    }).catch(() => null);
    if (!res) {
      this.count('UNANSWERED', 0);
      return null;
    }
    const code = res.status === 201 ? 'CREATED' : String(res.body?.code ?? `HTTP_${res.status}`);
    const orderId = res.status === 201 ? (res.body.orderId as string) : undefined;
    Object.assign(record, { answeredAt: historyNow(), status: res.status, code }, orderId && { orderId });
    this.count(code, res.status);
    if (orderId) this.orderIds.push(orderId);
    return { status: res.status, code, orderId };
  }

  /**
   * A buyer's way through the waiting room: join (again, while the door still answers
   * its cached SOLD_OUT and units are coming back), read the ticket until admitted,
   * buy with the pass; then, for wave 1, the order's fate. Gives up after PATIENCE_MS.
   */
  async shop(i: number, userId: string, fate: (orderId: string, i: number) => Promise<void>): Promise<void> {
    const deadline = Date.now() + PATIENCE_MS;
    let ticket: string | null = null;
    while (Date.now() < deadline) {
      const url = this.app(i);
      const res = await request(
        url,
        ticket ? 'GET' : 'POST',
        `/api/products/${PRODUCT}/queue${ticket ? `/${ticket}` : ''}`,
        ticket ? {} : { json: { userId } },
      ).catch(() => null);
      const body = (res?.body ?? {}) as Record<string, unknown>;
      if (res && (res.status === 200 || res.status === 202)) {
        ticket = String(body.ticket);
        if (body.state === 'admitted') {
          const bought = await this.buy(url, userId, String(body.pass));
          if (bought?.orderId) await fate(bought.orderId, i);
          return;
        }
        if (body.state !== 'waiting') {
          this.count(`QUEUE_${String(body.state).toUpperCase()}`, res.status);
          return;
        }
      }
      await sleep(50);
    }
    this.count('GAVE_UP', 0);
  }

  /** Wave 1's afterlife: its nth 201 paid, cancelled, or left to expire (FATE). */
  async decide(orderId: string, i: number): Promise<void> {
    const fate = FATE[this.afterlife++ % FATE.length];
    this.fates[fate] = (this.fates[fate] ?? 0) + 1;
    if (fate === 'expire') return;
    await this.after(fate, i, (url) =>
      fate === 'pay'
        ? pay(url, orderId, `pay-${orderId}`, PAYMENT_SECRET)
        : request(url, 'POST', `/api/orders/${orderId}/cancel`),
    );
  }

  /**
   * A payment or a cancel through a live app; sent again (the same paymentId: the same
   * payment) through the other when its app was killed under it. Answers other than 200 counted.
   */
  async after(what: string, i: number, send: (url: string) => Promise<JsonResponse>): Promise<void> {
    const res = await send(this.app(i)).catch(() => send(this.app(i)));
    if (res.status !== 200) this.count(`${what.toUpperCase()}_${String(res.body?.code ?? res.status)}`, res.status);
  }

  count(code: string, status: number): void {
    this.codes[code] = (this.codes[code] ?? 0) + 1;
    if (status > 0) this.status[status] = (this.status[status] ?? 0) + 1;
  }

  get load(): LoadResult {
    return {
      sent: this.requests.length,
      status: this.status,
      codes: this.codes,
      errors: this.requests.filter((r) => r.answeredAt === null).length,
      timeouts: 0,
      orderIds: this.orderIds,
      distinctBuyers: new Set(this.requests.map((r) => r.userId)).size,
      startedAt: this.startedAt,
      durationMs: Date.now() - this.startedAt,
      latency: { p50: 0, p90: 0, p99: 0, max: 0 },
      requests: this.requests,
    };
  }
}

/**
 * `npm run audit -- --redis URL --database URL --product ID --key-prefix P` on the
 * stores once the sale is over (scripts/audit.js, on the Node running this): its exit
 * code, and what it printed. Its exit code 0 is required.
 */
function runAudit(redisUrl: string, databaseUrl: string): { ok: boolean; output: string } {
  const script = join(__dirname, '..', '..', '..', 'scripts', 'audit.js');
  const res = spawnSync(
    process.execPath,
    [script, '--redis', redisUrl, '--database', databaseUrl, '--product', PRODUCT, '--key-prefix', PREFIX],
    { encoding: 'utf8', timeout: 60_000 },
  );
  return { ok: res.status === 0, output: `${res.stdout ?? ''}${res.stderr ?? ''}`.trim() };
}

export async function wholeSale(ctx: Context): Promise<Outcome> {
  const stock = ctx.quick ? 30 : 60;
  const [redis, pg] = await Promise.all([startPrivateRedis(), startPrivatePostgres()]);
  const client = harnessClient(redis.url);
  try {
    const db = await pg.createDatabase('whole');
    const k = new KeyLayout(PREFIX).product(PRODUCT);
    const clock = await clockAtStart(client);
    const env = {
      DATABASE_URL: db,
      LOCK_TTL_MS: '1000',
      EXPIRY_SWEEP_MS: '50',
      SETTLE_CLAIM_IDLE_MS: '500',
      PG_STATEMENT_TIMEOUT_MS: '1000',
    };
    const [a] = await apps(1, 'fenced', redis.url, env);
    const [b] = await apps(1, 'fenced', redis.url, { ...env, ...stopsAtWrite(KILL_AT_WRITE) });
    let bAlive = true;
    const shop = new Shop([
      { url: a.url, alive: () => true },
      { url: b.url, alive: () => bAlive },
    ]);
    // The window opens OPENS_IN_MS from now by Redis's clock, the door's clock.
    const [seconds, micros] = await client.time();
    const startsAt = Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000) + OPENS_IN_MS;
    const put = await request(a.url, 'PUT', `/api/products/${PRODUCT}`, {
      json: {
        stock,
        perUserLimit: 1,
        discardOrders: true,
        paymentTimeoutMs: PAYMENT_TIMEOUT_MS,
        startsAt: new Date(startsAt).toISOString(),
        queue: { admitPerSecond: 200, passTtlMs: 5_000 },
      },
      token: TOKEN,
    });
    if (put.status !== 200) throw new Error(`sale setup: ${put.status} ${JSON.stringify(put.body)}`);
    // Before the opening, and without a pass: refused, nothing written.
    const early = await shop.buy(a.url, 'early');
    timeline(
      'sale set up',
      `${n(stock)} units opening in ${OPENS_IN_MS} ms, a waiting room at 200/s; a buyer before it told ${early?.code}`,
    );

    // Wave 1: one and a half times the stock, through both apps' doors.
    const wave1Buyers = Math.round(stock * 1.5);
    const wave1 = Promise.all(
      Array.from({ length: wave1Buyers }, (_, i) => shop.shop(i, `w1-${i}`, (id, j) => shop.decide(id, j))),
    );
    await waitForStop(b, `app B to stop at its write ${KILL_AT_WRITE}`, 30_000);
    const soldAtKill = stock - Number(await client.get(k.stock));
    await pg.stop();
    timeline('postgres stopped', `fast shutdown with ${n(soldAtKill)} sold: the sale goes on, settlement waits`);
    process.kill(b.pid, 'SIGKILL');
    bAlive = false;
    timeline(
      'app B killed',
      `SIGKILL pid ${b.pid} at its write ${KILL_AT_WRITE}, holding the lock: its buyers get no answer`,
    );
    await wave1;
    // Every reservation of wave 1 decided: paid, cancelled, or expired by the sweeper.
    await waitUntil(
      'every reservation paid, cancelled or expired',
      async () => (await client.zcard(k.deadlines)) === 0,
      30_000,
    );
    const returned = Number(await client.get(k.stock));
    const lagAtReturn = await unsettled(client, k);
    await startPrivatePostgres({ port: pg.port, dir: pg.dir });
    timeline(
      'postgres started again',
      `on its data, ${n(lagAtReturn)} entries to settle; ${n(returned)} units back in stock (cancelled, expired, or never sold)`,
    );

    // Wave 2: fresh buyers for the units that came back, each paying at once.
    const wave2Buyers = returned * 2;
    const firstOfWave2 = shop.requests.length;
    await Promise.all(
      Array.from({ length: wave2Buyers }, (_, i) =>
        shop.shop(i, `w2-${i}`, (id, j) => shop.after('pay', j, (url) => pay(url, id, `pay-${id}`, PAYMENT_SECRET))),
      ),
    );
    const wave2Sold = shop.requests.slice(firstOfWave2).filter((r) => r.code === 'CREATED').length;
    timeline('second wave', `${n(wave2Buyers)} buyers for ${n(returned)} returned units: ${n(wave2Sold)} bought`);

    const problems: string[] = [];
    const drainMs = await waitForSettlement(client, k, 60_000);
    if (drainMs === null)
      problems.push(`settlement had not drained 60 s after the sale (${await unsettled(client, k)} unsettled)`);
    const settled = drainMs === null ? undefined : await readSettled(db, PRODUCT);
    const history = await judgeHistory(client, k, shop.requests, { start: clock, ...(settled && { settled }) });
    problems.push(...history.problems);
    const check = await checkSettled(db, client, k, PRODUCT);
    if (!check.ok) problems.push(check.problem!);
    const sale = await readSale(client, k);
    if (sale.stockLeft !== 0)
      problems.push(`undersell: ${sale.stockLeft} left though the second wave asked for twice that`);
    if (early?.status === 201 || !early)
      problems.push(`a purchase before the opening was answered ${early?.status ?? 'nothing'}`);
    if (sale.orders.some((o) => o.ms < startsAt)) problems.push("an order older than the sale's start");
    if (soldAtKill <= 0) problems.push('nothing was sold before app B was killed');
    if (lagAtReturn <= 0) problems.push('nothing waited for PostgreSQL while it was stopped');
    if (!(shop.fates.cancel > 0 && shop.fates.expire > 0 && shop.fates.pay > 0))
      problems.push(`wave 1 did not pay, cancel and let expire (${tallied(shop.fates)})`);
    if (wave2Sold === 0) problems.push('the second wave bought nothing');
    if ((sale.statuses?.E ?? 0) === 0 || (sale.statuses?.C ?? 0) === 0)
      problems.push('no order ended cancelled and expired');
    const audit = runAudit(redis.url, db);
    if (!audit.ok) problems.push(`npm run audit failed: ${audit.output.split('\n').slice(-5).join(' | ')}`);
    return {
      name: 'whole sale (window, waiting room, afterlife, app killed, PostgreSQL stopped)',
      load: shop.load,
      sold: sale.initialStock - sale.stockLeft,
      left: sale.stockLeft,
      problems,
      history: history.line,
      story:
        `${n(stock)} units opening ${OPENS_IN_MS} ms ahead by Redis's clock, behind a waiting room (200/s); before it a buyer was told ${early?.code}; ` +
        `${n(wave1Buyers)} buyers in wave 1 through two apps; app B SIGKILLed at its write ${KILL_AT_WRITE} after ${n(soldAtKill)} sold, ` +
        `PostgreSQL stopped there and started again once every reservation was decided (wave 1: ${tallied(shop.fates)}); ` +
        `${n(returned)} units back, ${n(wave2Buyers)} buyers in wave 2 bought ${n(wave2Sold)}; answers ${tallied(shop.codes)}; ` +
        `statuses ${tallied(sale.statuses ?? {})}; ${n(check.rows)} orders in PostgreSQL as Redis has them, drained ${drainMs === null ? 'never' : `${n(drainMs)} ms`} after; ` +
        `npm run audit: ${audit.ok ? 'exit 0' : 'FAILED'} (${audit.output.split('\n').at(-1)})`,
    };
  } finally {
    await client.quit().catch(() => undefined);
    await stopAll();
  }
}
