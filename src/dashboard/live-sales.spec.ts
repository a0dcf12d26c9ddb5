import { commandCalls, resetPlainSale, startSaleIn, useTestRedis } from '../../test/helpers/redis';
import { AppConfig, loadConfig } from '../config/app-config';
import type { PurchasePath } from '../orders/purchases/purchase-path';
import { KeyLayout } from '../redis/key-layout';
import { PurchaseTelemetry } from '../telemetry/purchase-telemetry';
import { LIVE_TTL_MS, LiveSales } from './live-sales';

describe('LiveSales (the dashboard aggregate)', () => {
  const redis = useTestRedis();
  const sales: LiveSales[] = [];
  afterEach(() => Promise.all(sales.splice(0).map((s) => s.onApplicationShutdown())));

  /** A LiveSales on a sale of `stock` units of `phone`, listening to its own PurchaseTelemetry. */
  async function setUp(env: Record<string, string> = {}, stock = 10) {
    const client = redis.client();
    const { keys, k } = await startSaleIn(client, stock, 1, 'live');
    const config: AppConfig = loadConfig({ REDIS_URL: redis.url(), ADMIN_TOKEN: 'a-long-enough-admin-token', ...env });
    const purchases = { status: () => Promise.resolve({ lostLocks: 2 }) } as unknown as PurchasePath;
    const telemetry = new PurchaseTelemetry();
    const live = new LiveSales(config, client, keys, purchases, telemetry);
    live.onModuleInit();
    sales.push(live);
    const field = (name: string) => client.hget(k.live, `${live.instance}|${name}`);
    return { client, keys, k, live, telemetry, field };
  }

  it('counts answers by code and the buyers waiting, and adds them to the live hash per publish', async () => {
    const { client, k, live, telemetry, field } = await setUp();
    for (let i = 0; i < 5; i++) telemetry.arrived('phone');
    telemetry.answered('phone', 'CREATED');
    telemetry.answered('phone', 'CREATED');
    telemetry.answered('phone', 'SOLD_OUT');
    await live.publish();
    expect(await field('CREATED')).toBe('2');
    expect(await field('SOLD_OUT')).toBe('1');
    expect(await field('waiting')).toBe('2');
    expect(await field('pid')).toBe(String(process.pid));
    expect(await field('lostLocks')).toBe('2');
    expect(Math.abs(Number(await field('seen')) - Date.now())).toBeLessThan(5_000);
    expect(await client.pttl(k.live)).toBeGreaterThan(LIVE_TTL_MS - 60_000);
    // The next publish adds what came since, not the running total again.
    telemetry.answered('phone', 'CREATED');
    telemetry.answered('phone', 'LOCK_TIMEOUT');
    await live.publish();
    expect(await field('CREATED')).toBe('3');
    expect(await field('LOCK_TIMEOUT')).toBe('1');
    expect(await field('waiting')).toBe('0');
    expect(live.recent().map((p) => p.productId)).toEqual(['phone']);
  });

  it('costs Redis one script per changed product per publish, none per request, none when idle', async () => {
    const { client, live, telemetry, field } = await setUp();
    // Publishes only when told to here, so that the count below is exact.
    clearInterval(live['timer']);
    const before = await commandCalls(client, 'evalsha');
    for (let i = 0; i < 2_000; i++) {
      telemetry.arrived('phone');
      telemetry.answered('phone', i < 10 ? 'CREATED' : 'SOLD_OUT');
      // Requests arrive over many turns of the event loop, not in one.
      if (i % 100 === 0) await new Promise(setImmediate);
    }
    await live.publish();
    await live.publish();
    expect((await commandCalls(client, 'evalsha')) - before).toBe(1);
    expect(await field('SOLD_OUT')).toBe('1990');
  });

  it('writes nothing for a product without a sale, and does not offer it', async () => {
    const { client, keys, live, telemetry } = await setUp();
    telemetry.arrived('ghost');
    telemetry.answered('ghost', 'UNKNOWN_PRODUCT');
    await live.publish();
    expect(await client.exists(keys.product('ghost').live)).toBe(0);
    expect(live.recent().map((p) => p.productId)).not.toContain('ghost');
  });

  it('drops what it has not published when the sale restarts', async () => {
    const { live, telemetry, field } = await setUp();
    telemetry.arrived('phone');
    telemetry.answered('phone', 'CREATED');
    live.saleRestarted('phone');
    await live.publish();
    expect(await field('CREATED')).toBeNull();
    // It still says it is there, waiting for nobody.
    expect(await field('waiting')).toBe('0');
  });

  it('publishes what is left on shutdown', async () => {
    const { live, telemetry, field } = await setUp();
    telemetry.arrived('phone');
    telemetry.answered('phone', 'LIMIT_REACHED');
    sales.splice(sales.indexOf(live), 1);
    await live.onApplicationShutdown();
    expect(await field('LIMIT_REACHED')).toBe('1');
  });

  it('with TELEMETRY=0 listens to nothing and publishes nothing', async () => {
    const { client, k, live, telemetry } = await setUp({ TELEMETRY: '0' });
    telemetry.arrived('phone');
    telemetry.answered('phone', 'CREATED');
    live.saleRestarted('phone');
    await live.publish();
    await live.onApplicationShutdown();
    expect(await client.exists(k.live)).toBe(0);
    expect(live.recent()).toEqual([]);
  });

  it('shares one live hash between instances, each under its own id', async () => {
    const { client, keys, k, live } = await setUp();
    const other = new LiveSales(
      live['config'],
      client,
      new KeyLayout(keys.prefix),
      { status: () => Promise.resolve({ lostLocks: 0 }) } as unknown as PurchasePath,
      new PurchaseTelemetry(),
    );
    Object.defineProperty(other, 'instance', { value: 'elsewhere/42' });
    other.arrived('phone');
    other.answered('phone', 'CREATED');
    live.arrived('phone');
    live.answered('phone', 'CREATED');
    await Promise.all([live.publish(), other.publish()]);
    const hash = await client.hgetall(k.live);
    expect(hash[`${live.instance}|CREATED`]).toBe('1');
    expect(hash['elsewhere/42|CREATED']).toBe('1');
  });

  /** A second instance on the same Redis and keys, as another process would be. */
  function otherInstance(live: LiveSales, client = live['redis']): LiveSales {
    const other = new LiveSales(
      live['config'],
      client,
      live['keys'],
      { status: () => Promise.resolve({ lostLocks: 0 }) } as unknown as PurchasePath,
      new PurchaseTelemetry(),
    );
    Object.defineProperty(other, 'instance', { value: 'elsewhere/42' });
    return other;
  }

  it('drops what it counted in the last sale when another instance restarted it before the publish', async () => {
    const { client, k, live, telemetry, field } = await setUp();
    telemetry.arrived('phone');
    telemetry.answered('phone', 'CREATED');
    // It has published in this sale once, so it knows the sale's id.
    await live.publish();
    expect(await field('CREATED')).toBe('1');
    // Answers of the old sale, counted here, not yet published...
    telemetry.arrived('phone');
    telemetry.answered('phone', 'SOLD_OUT');
    // ...when another instance restarts the sale, as ProductsService.startSale does.
    const other = otherInstance(live);
    other.saleRestarted('phone');
    other.saleStarted('phone', Number((await resetPlainSale(client, k, 5, 1))[1]));
    await live.publish();
    expect(await field('SOLD_OUT')).toBeNull();
    expect(await field('CREATED')).toBeNull();
    expect(await field('waiting')).toBe('0');
    // The publish's reply taught it the new sale: its answers count again.
    telemetry.arrived('phone');
    telemetry.answered('phone', 'CREATED');
    await live.publish();
    expect(await field('CREATED')).toBe('1');
    // The instance that restarted knows the sale from its own reset.
    other.arrived('phone');
    other.answered('phone', 'CREATED');
    await other.publish();
    expect(await client.hget(k.live, 'elsewhere/42|CREATED')).toBe('1');
  });

  it('while buyers wait, publishes every tick (a heartbeat), news or not', async () => {
    const { client, k, live, telemetry, field } = await setUp();
    clearInterval(live['timer']);
    telemetry.arrived('phone');
    await live.publish();
    // As if the last publish were long ago: nothing changed since, yet a buyer waits.
    await client.hset(k.live, `${live.instance}|seen`, '1');
    await live.publish();
    expect(Math.abs(Number(await field('seen')) - Date.now())).toBeLessThan(5_000);
    // Nobody waiting and nothing new: no publish.
    telemetry.answered('phone', 'CREATED');
    await live.publish();
    await client.hset(k.live, `${live.instance}|seen`, '1');
    await live.publish();
    expect(await field('seen')).toBe('1');
  });

  it('keeps the counts of a publish that was never sent (not connected) for the next tick', async () => {
    const { live } = await setUp();
    const own = redis.client({ enableOfflineQueue: false, maxRetriesPerRequest: 1 });
    const ready = () => new Promise((done) => own.once('ready', done));
    await ready();
    const other = otherInstance(live, own);
    const field = (name: string) => live['redis'].hget(live['keys'].product('phone').live, `elsewhere/42|${name}`);
    other.arrived('phone');
    other.answered('phone', 'CREATED');
    await other.publish();
    other.arrived('phone');
    other.answered('phone', 'CREATED');
    const ended = new Promise((done) => own.once('end', done));
    own.disconnect();
    await ended;
    // Refused unsent: "Connection is closed." (ended client).
    await other.publish();
    expect(await field('CREATED')).toBe('1');
    // And while it connects again: "Stream isn't writeable".
    const back = ready();
    void own.connect().catch(() => undefined);
    await other.publish();
    expect(await field('CREATED')).toBe('1');
    await back;
    await other.publish();
    expect(await field('CREATED')).toBe('2');
  });
});
