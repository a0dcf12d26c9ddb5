/**
 * Faults at the door: the waiting room and its passes under a killed app, a restarted
 * Redis and a lost reply (the door's trust in a refusal it learnt is
 * door-false-refusal.ts's). Each line reads the queue and the sale back from Redis and
 * waits for states (a ticket admitted, a pass lapsed), never for a lucky moment.
 */
import { JsonResponse, request, waitForHealth } from '../../harness/http';
import { startPrivateRedis } from '../../harness/redis';
import { startTcpProxy, TcpProxy } from '../../harness/tcp-proxy';
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
import { historyNow } from '../history/clock';

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
export class Answers {
  private readonly answers: { status: number; code: string; orderId?: string }[] = [];
  /** Every purchase request, as the history checker reads them. */
  private readonly requests: RequestRecord[] = [];
  private readonly startedAt = Date.now();

  async send(url: string, method: string, path: string, json: unknown, headers: Record<string, string> = {}) {
    const sentAt = historyNow();
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
        answeredAt: historyNow(),
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
export async function sold(client: ReturnType<typeof harnessClient>, problems: string[]) {
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

export const DOOR_FAULTS = {
  'door-app-killed-with-passes': appKilledWithPasses,
  'door-redis-restarted-queue': redisRestartedWithQueue,
  'door-lost-reply-pass': lostReplyOnPass,
};
