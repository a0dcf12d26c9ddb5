/**
 * Faults at the door: the waiting room and its passes under a killed app, a restarted
 * Redis and a lost reply; and the door's trust in a refusal it learnt, which refuses a
 * returned unit for up to DOOR_TRUST_MS (the lesson of door-false-refusal). Each line
 * reads the queue and the sale back from Redis and waits for states (a ticket admitted,
 * a pass lapsed, an answer Redis was not asked for), never for a lucky moment.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { JsonResponse, request, startSale, waitForHealth } from '../../harness/http';
import { startPrivateRedis } from '../../harness/redis';
import { startTcpProxy, TcpProxy } from '../../harness/tcp-proxy';
import { DOOR_TRUST_MS } from '../../src/door/door-refusals';
import { KeyLayout } from '../../src/redis/key-layout';
import { fencedWrite } from '../../src/redis/lua-scripts';
import type { CheckName, HistoryReport, RequestRecord } from '../history/history';
import type { LoadResult } from '../load';
import { readSale, SaleSnapshot } from '../verdict';
import {
  apps,
  Context,
  harnessClient,
  n,
  Outcome,
  PREFIX,
  PRODUCT,
  timeline,
  TOKEN,
  waitUntil,
  noAofRewrite,
  armed,
  onPrivateRedis,
  RedisStage,
} from './kit';
import { judgeHistory } from './history-verdict';

/**
 * How long a pass stays valid in these lines: long enough that every pass of a queue
 * joined one buyer at a time is issued before the first lapses, on a loaded machine too.
 */
const PASS_TTL_MS = 3_000;

interface Ticket {
  readonly ticket: string;
  readonly state: string;
  readonly position: number;
  readonly pass?: string;
}

/** Every answer the line's buyers got, as the fault suite's lines count them. */
class Answers {
  private readonly answers: { status: number; code: string; orderId?: string }[] = [];
  /** Every purchase request, as the history checker reads them. */
  private readonly requests: RequestRecord[] = [];
  private readonly startedAt = Date.now();

  async send(url: string, method: string, path: string, json: unknown, headers: Record<string, string> = {}) {
    const sentAt = Date.now();
    const res: JsonResponse<Record<string, unknown>> = await request(url, method, path, { json, headers });
    const code = res.status === 201 ? 'CREATED' : String(res.body.code ?? `HTTP_${res.status}`);
    if (path.endsWith('/orders') || path === '/api/orders') {
      const orderId = res.body.orderId as string | undefined;
      this.answers.push({ status: res.status, code, orderId });
      const { userId } = json as { userId: string };
      this.requests.push({
        userId,
        productId: PRODUCT,
        quantity: 1,
        sentAt,
        answeredAt: Date.now(),
        status: res.status,
        code,
        ...(orderId && { orderId }),
      });
    }
    return res;
  }

  /**
   * A door line: these answers, the sale as Redis has it and as a history, what broke,
   * what happened. `lesson`: the promise the line breaks on purpose, the history check
   * that must fail for it, and what else the report must show (null when shown).
   */
  async outcome(
    stage: Pick<RedisStage, 'client' | 'k' | 'clock'>,
    name: string,
    sale: SaleSnapshot,
    problems: string[],
    story: string,
    lesson?: { readonly says: string; readonly check: CheckName; readonly shown: (r: HistoryReport) => string | null },
  ): Promise<Outcome> {
    const history = await judgeHistory(stage.client, stage.k, this.requests, {
      start: stage.clock,
      ...(lesson && { lessons: [lesson.check] }),
    });
    const unshown = lesson?.shown(history.report);
    return {
      name,
      load: this.load,
      sold: sale.initialStock - sale.stockLeft,
      left: sale.stockLeft,
      problems: [...problems, ...history.problems, ...(unshown ? [unshown] : [])],
      ...(lesson && { lesson: lesson.says }),
      story,
      history: history.line,
    };
  }

  get load(): LoadResult {
    const status: Record<string, number> = {};
    const codes: Record<string, number> = {};
    for (const a of this.answers) {
      status[a.status] = (status[a.status] ?? 0) + 1;
      codes[a.code] = (codes[a.code] ?? 0) + 1;
    }
    return {
      sent: this.answers.length,
      status,
      codes,
      errors: 0,
      timeouts: 0,
      orderIds: this.answers.flatMap((a) => (a.orderId ? [a.orderId] : [])),
      distinctBuyers: 0,
      startedAt: this.startedAt,
      durationMs: Date.now() - this.startedAt,
      latency: { p50: 0, p90: 0, p99: 0, max: 0 },
      requests: this.requests,
    };
  }
}

const queueSale = (url: string, stock: number, passTtlMs = PASS_TTL_MS) =>
  request(url, 'PUT', `/api/products/${PRODUCT}`, {
    json: { stock, discardOrders: true, queue: { admitPerSecond: 1_000, passTtlMs } },
    token: TOKEN,
  });

async function join(answers: Answers, url: string, userId: string): Promise<Ticket> {
  const res = await answers.send(url, 'POST', `/api/products/${PRODUCT}/queue`, { userId });
  if (res.status !== 202) throw new Error(`joining the queue: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as unknown as Ticket;
}

async function read(url: string, t: Ticket): Promise<Ticket> {
  const res = await request(url, 'GET', `/api/products/${PRODUCT}/queue/${t.ticket}`);
  if (res.status !== 200) throw new Error(`reading a ticket: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as unknown as Ticket;
}

const buy = (answers: Answers, url: string, userId: string, pass: string) =>
  answers.send(url, 'POST', '/api/orders', { productId: PRODUCT, userId }, { 'admission-pass': pass });

/** The sale read back: the buyers of its orders still held, and the stock kept (a cancelled order's units back in it). */
async function sold(client: ReturnType<typeof harnessClient>, problems: string[]) {
  const sale = await readSale(client, new KeyLayout(PREFIX).product(PRODUCT));
  const held = sale.orders.filter((o) => !sale.returned?.has(o.orderId));
  const units = held.reduce((a, o) => a + o.quantity, 0);
  if (units > sale.initialStock) problems.push(`oversell: ${units} units held in orders of ${sale.initialStock}`);
  if (sale.initialStock !== sale.stockLeft + units) {
    problems.push(`stock not conserved: ${sale.initialStock} != ${sale.stockLeft} left + ${units} held in orders`);
  }
  const buyers = held.map((o) => o.userId).sort();
  if (new Set(buyers).size !== buyers.length) problems.push(`a buyer has two orders: ${buyers.join(', ')}`);
  return { sale, buyers };
}

/**
 * The app that admitted the first buyers is killed (SIGKILL) while their passes are
 * unused: nothing of the queue was in it. Another app serves the queue on; the passes
 * lapse, the next in line are admitted in order, and buy; the first ones cannot.
 */
export async function appKilledWithPasses(ctx: Context): Promise<Outcome> {
  return onPrivateRedis(async (stage) => {
    const { redis, client } = stage;
    const stock = ctx.quick ? 3 : 10;
    const answers = new Answers();
    const problems: string[] = [];
    const [first] = await apps(1, 'fenced', redis.url);
    if ((await queueSale(first.url, stock)).status !== 200) throw new Error('PUT of the queued sale failed');
    const tickets: Ticket[] = [];
    for (let i = 0; i < stock * 2; i++) tickets.push(await join(answers, first.url, `u${i}`));
    const admitted = tickets.filter((t) => t.state === 'admitted').length;
    if (admitted !== stock) problems.push(`${admitted} admitted for a stock of ${stock}`);
    timeline(
      'buyers joined',
      `${n(stock * 2)} joined through app pid ${first.pid}: ${n(admitted)} admitted, each with a pass`,
    );
    process.kill(first.pid, 'SIGKILL');
    timeline(
      'app killed',
      `SIGKILL pid ${first.pid} with all ${n(admitted)} passes unused; a second app serves the queue`,
    );
    const [second] = await apps(1, 'fenced', redis.url);
    // The next in line, admitted once the passes the dead app handed out lapse: all of
    // them, the last one issued included. (Waiting for the first of the next to be let in
    // instead judged the first passes when only the earliest had lapsed, whenever the
    // joins took longer than a pass's life on a loaded machine.)
    const next = tickets.slice(stock);
    await waitUntil(
      'the unused passes to lapse',
      async () =>
        (await Promise.all(tickets.slice(0, stock).map((t) => read(second.url, t)))).every(
          (t) => t.state === 'expired',
        ),
      PASS_TTL_MS * 10,
    );
    timeline(
      'next in line admitted',
      `the unused passes lapsed (${PASS_TTL_MS} ms): the next in line admitted, in order`,
    );
    const firstNow = await Promise.all(tickets.slice(0, stock).map((t) => read(second.url, t)));
    if (firstNow.some((t) => t.state !== 'expired')) {
      problems.push(`the unused passes read ${firstNow.map((t) => t.state).join(', ')}, not expired`);
    }
    const nextNow = await Promise.all(next.map((t) => read(second.url, t)));
    if (nextNow.some((t) => t.state !== 'admitted')) {
      problems.push(`the next in line read ${nextNow.map((t) => t.state).join(', ')}, not all admitted`);
    }
    // A lapsed pass buys nothing; a fresh one buys once.
    const lapsed = await buy(answers, second.url, 'u0', tickets[0].pass!);
    if (lapsed.body.code !== 'ADMISSION_INVALID') problems.push(`a lapsed pass was answered ${lapsed.status}`);
    for (const [i, t] of nextNow.entries()) {
      const res = await buy(answers, second.url, `u${stock + i}`, t.pass ?? '');
      if (res.status !== 201) problems.push(`u${stock + i}'s pass was answered ${res.status} ${String(res.body.code)}`);
    }
    timeline(
      'next in line bought',
      `a lapsed pass answered ${String(lapsed.body.code)}; then the next in line bought with theirs`,
    );
    const { sale, buyers } = await sold(client, problems);
    const expected = next.map((_, i) => `u${stock + i}`).sort();
    if (buyers.join() !== expected.join()) problems.push(`orders went to ${buyers.join(', ')}, not the next in line`);
    return answers.outcome(
      stage,
      'door: app killed holding admitted passes',
      sale,
      problems,
      `${n(stock * 2)} joined through one app, ${n(admitted)} admitted (passes <= stock); the app SIGKILLed with all ` +
        `${n(admitted)} passes unused; through a second app the passes lapsed after ${PASS_TTL_MS} ms (tickets read expired), ` +
        `the next ${n(next.length)} in line were admitted in order and bought; a lapsed pass: ${String(lapsed.body.code)}`,
    );
  });
}

/**
 * Redis is restarted (SIGTERM, then started on the same AOF) with buyers waiting in the
 * queue: every ticket keeps its place, and the sale goes on from there.
 */
export async function redisRestartedWithQueue(ctx: Context): Promise<Outcome> {
  return onPrivateRedis(
    async (stage) => {
      const { redis, client } = stage;
      const stock = ctx.quick ? 2 : 5;
      const answers = new Answers();
      const problems: string[] = [];
      await noAofRewrite(client);
      const [app] = await apps(1, 'fenced', redis.url);
      // Passes that outlive the restart: every ticket's place must read the same after it.
      if ((await queueSale(app.url, stock, 60_000)).status !== 200) throw new Error('PUT of the queued sale failed');
      const tickets: Ticket[] = [];
      for (let i = 0; i < stock * 3; i++) tickets.push(await join(answers, app.url, `u${i}`));
      const before = await Promise.all(tickets.map((t) => read(app.url, t)));
      timeline(
        'buyers queued',
        `${n(tickets.length)} joined: ${n(before.filter((t) => t.state === 'admitted').length)} admitted, ${n(before.filter((t) => t.state === 'waiting').length)} waiting`,
      );
      await redis.stop();
      timeline('redis stopped', 'SIGTERM with buyers in the queue');
      // Tracked: stopAll stops it.
      await startPrivateRedis({ appendonly: true, port: redis.port, dir: redis.dir });
      await waitForHealth(app.url);
      const after = await Promise.all(tickets.map((t) => read(app.url, t)));
      const moved = after.filter((t, i) => t.position !== before[i].position || t.ticket !== before[i].ticket);
      timeline(
        'redis restarted',
        `on its AOF, the app healthy again: ${n(tickets.length - moved.length)} of ${n(tickets.length)} tickets in the same place`,
      );
      if (moved.length > 0) problems.push(`${moved.length} tickets changed place across the restart`);
      // The sale goes on: the admitted buy with the passes they were given before the restart.
      let bought = 0;
      for (const [i, t] of after.entries()) {
        if (t.state !== 'admitted' || !t.pass) continue;
        const res = await buy(answers, app.url, `u${i}`, t.pass);
        if (res.status === 201) bought++;
        else problems.push(`an admitted buyer after the restart was answered ${res.status} ${String(res.body.code)}`);
      }
      if (bought === 0) problems.push('nobody bought after the restart');
      timeline('admitted buyers bought', `${n(bought)} bought with the passes given before the restart`);
      const { sale } = await sold(client, problems);
      return answers.outcome(
        stage,
        'door: redis restarted with a queue',
        sale,
        problems,
        `${n(tickets.length)} joined (${n(before.filter((t) => t.state === 'admitted').length)} admitted, ` +
          `${n(before.filter((t) => t.state === 'waiting').length)} waiting), Redis SIGTERMed and restarted on its AOF: ` +
          `${n(tickets.length - moved.length)} of ${n(tickets.length)} tickets in the same place, ${n(bought)} admitted buyers bought after it`,
      );
    },
    { appendonly: true },
  );
}

/**
 * The reply to the write that uses a pass is lost after Redis applied it: its buyer is
 * told OUTCOME_UNKNOWN, and the retry with the same pass is answered the order that
 * was written (the pass is the purchase's Idempotency-Key), never a second order.
 */
export async function lostReplyOnPass(ctx: Context): Promise<Outcome> {
  let proxy: TcpProxy | undefined;
  return onPrivateRedis(
    async (stage) => {
      const { redis, client } = stage;
      const stock = ctx.quick ? 3 : 6;
      const answers = new Answers();
      const problems: string[] = [];
      proxy = await startTcpProxy({ port: redis.port });
      const [app] = await apps(1, 'fenced', proxy.url, { LOCK_TTL_MS: '1000' });
      // A first sale through the proxy caches the scripts, so the marker hits the write itself.
      const warm = await request(app.url, 'PUT', '/api/products/warm-up', { json: { stock: 1 }, token: TOKEN });
      if (warm.status !== 200) throw new Error('warm-up sale failed');
      await request(app.url, 'POST', '/api/orders', { json: { productId: 'warm-up', userId: 'w' } });
      // Passes that outlive the lost answer's wait (a command timeout) and its retry.
      if ((await queueSale(app.url, stock, 60_000)).status !== 200) throw new Error('PUT of the queued sale failed');
      const tickets: Ticket[] = [];
      for (let i = 0; i < stock; i++) tickets.push(await join(answers, app.url, `u${i}`));
      const cut = armed(proxy.loseReplyTo(fencedWrite.sha1));
      const lost = await buy(answers, app.url, 'u0', tickets[0].pass!);
      timeline(
        'reply lost',
        `Redis applied u0's fenced write (its pass's purchase); the reply never came: u0 told ${String(lost.body.code)}`,
        cut.fired() ? cut.at() : undefined,
      );
      if (!cut.fired()) problems.push('the fault never fired: no write carried the marker');
      if (lost.body.code !== 'OUTCOME_UNKNOWN') {
        problems.push(`the buyer whose reply was lost was told ${lost.status} ${String(lost.body.code)}`);
      }
      await proxy.idle();
      const retry = await buy(answers, app.url, 'u0', tickets[0].pass!);
      timeline(
        'retried with the same pass',
        `answered ${retry.status}${retry.headers.get('idempotent-replayed') === 'true' ? ', replayed: the order written, not a second' : ''}`,
      );
      const { sale, buyers } = await sold(client, problems);
      const u0 = sale.orders.filter((o) => o.userId === 'u0');
      if (u0.length !== 1) problems.push(`u0 has ${u0.length} orders, not 1`);
      if (retry.status !== 201 || retry.body.orderId !== u0[0]?.orderId) {
        problems.push(
          `the retry with the pass was answered ${retry.status} ${JSON.stringify(retry.body)}, not u0's order`,
        );
      }
      // The others buy with theirs; the pass does not buy twice.
      for (let i = 1; i < stock; i++) {
        const res = await buy(answers, app.url, `u${i}`, tickets[i].pass!);
        if (res.status !== 201) problems.push(`u${i} was answered ${res.status} ${String(res.body.code)}`);
      }
      const again = await sold(client, problems);
      return answers.outcome(
        stage,
        'door: lost reply on the pass-consuming write',
        again.sale,
        problems,
        `the reply to u0's fenced write (its pass's purchase) lost after Redis applied it: u0 told ${String(lost.body.code)}; ` +
          `the retry with the same pass answered ${retry.status} ${retry.headers.get('idempotent-replayed') === 'true' ? '(replayed)' : ''} ` +
          `with the order written (${n(u0.length)} order for u0, ${n(buyers.length)} before the others bought)`,
      );
    },
    {},
    async () => proxy?.close(),
  );
}

/**
 * How long after a unit's return (its cancel answered) the door's refusal is asked for.
 * Asked at once, the checker cannot prove it false: the return's entry and the request's
 * start lie within the clocks' resolution of each other (a millisecond each side and
 * twice the link's uncertainty, ±3 to ±4 ms here), so the refusal is undecided (run with
 * no wait: "0 false refusals of 2 refusals (2 undecided)"). 100 ms is far more than that
 * blur (it would take a TIME round trip near 100 ms to undo it) and leaves the door 150
 * ms of its trust for the cancel's answer: a cycle that overruns it is simply repeated.
 */
const RETURN_GAP_MS = 100;
/** Cycles of "learn the sell-out, return a unit, ask" before the line says the door never answered. */
const MAX_CYCLES = 20;

/**
 * Whether the app asked Redis for the product's stock while a request ran: every
 * purchase the route serves reads it first (readSale's GET), an answer at the door reads
 * nothing. MONITOR's lines come in the order Redis ran the commands, so a marker ECHOed
 * before the request and one after its answer bound it: no timing involved.
 */
async function stockReads(client: ReturnType<typeof harnessClient>, stockKey: string) {
  const monitor = await client.monitor();
  let reads = 0;
  let marks = 0;
  const seen = new Map<string, () => void>();
  monitor.on('monitor', (_time: string, args: string[]) => {
    const command = args[0]?.toLowerCase();
    if (command === 'get' && args[1] === stockKey) reads++;
    if (command === 'echo') seen.get(args[1])?.();
  });
  const mark = async () => {
    const marker = `door-false-refusal-mark-${++marks}`;
    const shown = new Promise<void>((resolve) => seen.set(marker, resolve));
    await client.echo(marker);
    await shown;
    seen.delete(marker);
  };
  return {
    async during<T>(ask: () => Promise<T>): Promise<{ answer: T; asked: boolean }> {
      await mark();
      const before = reads;
      const answer = await ask();
      await mark();
      return { answer, asked: reads > before };
    },
    close: () => monitor.disconnect(),
  };
}

/**
 * The door's trust window, forced: a small stock sold out through the door's route, a
 * buyer refused SOLD_OUT by Redis (the door learns it), one reservation cancelled (its
 * unit back in stock), and RETURN_GAP_MS later a buyer through the same route, refused
 * SOLD_OUT by the door's memory while the unit sits in stock. The history checker must
 * name that buyer's refusal false (the lesson, falseRefusals); every other promise holds,
 * and once the trust lapses the refused buyer buys the unit. The window is wall time, so
 * the cycle repeats (the unit sold again, the refusal learnt again, a cancel, an ask)
 * until the door answered from its memory, as MONITOR tells (Redis not asked), or the
 * line fails after MAX_CYCLES.
 */
export async function falseRefusalAtDoor(ctx: Context): Promise<Outcome> {
  return onPrivateRedis(async (stage) => {
    const { redis, client, k } = stage;
    const stock = ctx.quick ? 2 : 5;
    const answers = new Answers();
    const problems: string[] = [];
    const [app] = await apps(1, 'fenced', redis.url);
    // Reservations that stay reserved until cancelled: no expiry returns a unit behind the line's back.
    await startSale(app.url, TOKEN, PRODUCT, stock, 1, 600_000);
    const purchase = (userId: string) => answers.send(app.url, 'POST', `/api/products/${PRODUCT}/orders`, { userId });
    const held: string[] = [];
    for (let i = 0; i < stock; i++) {
      const res = await purchase(`b${i}`);
      if (res.status !== 201) throw new Error(`b${i} could not buy: ${res.status} ${JSON.stringify(res.body)}`);
      held.push(res.body.orderId as string);
    }
    timeline('sold out', `${n(stock)} units bought through POST /api/products/${PRODUCT}/orders, the door's route`);
    const reads = await stockReads(client, k.stock);
    let refused: { userId: string; cycle: number; orderId: string } | undefined;
    let lapsed = 0;
    try {
      for (let cycle = 1; cycle <= MAX_CYCLES && !refused && problems.length === 0; cycle++) {
        const learner = await reads.during(() => purchase(`l${cycle}`));
        if (learner.answer.body.code !== 'SOLD_OUT' || !learner.asked) {
          problems.push(
            `l${cycle} was answered ${learner.answer.status} ${String(learner.answer.body.code)} ` +
              `${learner.asked ? 'by Redis' : 'at the door'}, not SOLD_OUT by Redis`,
          );
          break;
        }
        timeline(
          'door learnt SOLD_OUT',
          `l${cycle} refused SOLD_OUT by Redis; the door repeats it for ${DOOR_TRUST_MS} ms`,
        );
        const orderId = held.shift()!;
        const cancel = await request(app.url, 'POST', `/api/orders/${orderId}/cancel`);
        if (cancel.status !== 200)
          throw new Error(`cancelling ${orderId}: ${cancel.status} ${JSON.stringify(cancel.body)}`);
        timeline('unit returned', `order ${orderId} cancelled: 1 unit back in stock`);
        await sleep(RETURN_GAP_MS);
        const userId = `a${cycle}`;
        const ask = await reads.during(() => purchase(userId));
        if (ask.answer.status === 201) {
          // The door's memory had lapsed: Redis sold the unit. Sold out again: another cycle.
          held.push(ask.answer.body.orderId as string);
          lapsed++;
          timeline(
            'door asked Redis',
            `${userId} bought the returned unit: the door's ${DOOR_TRUST_MS} ms had run out; again`,
          );
        } else if (ask.answer.body.code === 'SOLD_OUT' && !ask.asked) {
          refused = { userId, cycle, orderId };
          timeline(
            'refused at the door',
            `${userId} refused SOLD_OUT from the door's memory, Redis not asked, with order ${orderId}'s unit in stock`,
          );
        } else {
          problems.push(
            `${userId}, asking after a return, was answered ${ask.answer.status} ${String(ask.answer.body.code)} ` +
              `${ask.asked ? 'by Redis' : 'at the door'}`,
          );
        }
      }
    } finally {
      reads.close();
    }
    if (!refused && problems.length === 0) {
      problems.push(
        `the door never answered from its memory in ${MAX_CYCLES} cycles: each ask after a return reached Redis ` +
          `(its ${DOOR_TRUST_MS} ms ran out before it every time)`,
      );
    }
    // The door's trust runs from its last learnt refusal, before the ask: past it, the
    // refused buyer's purchase goes to Redis and buys the unit it was refused.
    let after: JsonResponse<Record<string, unknown>> | undefined;
    if (refused) {
      await sleep(DOOR_TRUST_MS + 10);
      after = await purchase(refused.userId);
      if (after.status !== 201) {
        problems.push(
          `${refused.userId}, past the door's trust, was answered ${after.status} ${String(after.body.code)}`,
        );
      }
      timeline('bought after the trust', `${refused.userId} asked again ${DOOR_TRUST_MS} ms later: ${after.status}`);
    }
    const { sale } = await sold(client, problems);
    if (sale.stockLeft !== 0) problems.push(`the sale ended with ${sale.stockLeft} left, not sold out`);
    return answers.outcome(
      stage,
      "door: a returned unit refused from the door's memory",
      sale,
      problems,
      `${n(stock)} units sold out through the door's route; ` +
        (refused
          ? `cycle ${refused.cycle} of at most ${MAX_CYCLES} (in ${n(lapsed)} before it the door's ${DOOR_TRUST_MS} ms had run out ` +
            `and Redis sold the unit again): l${refused.cycle} refused ` +
            `SOLD_OUT by Redis, order ${refused.orderId} cancelled, ${refused.userId} asked ${RETURN_GAP_MS} ms later and was ` +
            `refused SOLD_OUT at the door (MONITOR: Redis not asked) with the unit in stock; ${DOOR_TRUST_MS} ms later ` +
            `it bought that unit (${after?.status})`
          : `no refusal from the door's memory in ${n(MAX_CYCLES)} cycles`),
      {
        says: `falseRefusals: a unit returned within the door's trust (${DOOR_TRUST_MS} ms) refused SOLD_OUT at the door`,
        check: 'falseRefusals',
        shown: (report) => {
          const named = report.findings.filter((f) => f.check === 'falseRefusals').map((f) => f.userId);
          return refused && report.counts.falseRefusals === 1 && named[0] === refused.userId
            ? null
            : `history: the false refusals name ${named.join(', ') || 'no one'} (×${report.counts.falseRefusals}), ` +
                `not the buyer refused at the door alone (${refused?.userId ?? 'none'})`;
        },
      },
    );
  });
}

export const DOOR_FAULTS = {
  'door-app-killed-with-passes': appKilledWithPasses,
  'door-redis-restarted-queue': redisRestartedWithQueue,
  'door-lost-reply-pass': lostReplyOnPass,
  'door-false-refusal': falseRefusalAtDoor,
};
