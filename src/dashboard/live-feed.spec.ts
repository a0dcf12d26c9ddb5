import { SettlementLag } from '../settlement/settlement-lag';
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { Subscription } from 'rxjs';
import { commandCalls, resetPlainSale, startSaleIn, useTestRedis } from '../../test/helpers/redis';
import { loadConfig } from '../config/app-config';
import { TooManyWatchersError } from '../errors/errors';
import { Escrow } from '../orders/escrow';
import { FaultStop } from '../orders/fault-stop';
import { ScriptedPurchases } from '../orders/purchases/scripted.purchases';
import { ReplicaAcks } from '../orders/replica-acks';
import {
  LiveFeed,
  MAX_PRODUCTS_PER_CLIENT,
  MAX_STREAMS,
  MAX_STREAMS_PER_CLIENT,
  MAX_WATCHED_PRODUCTS,
} from './live-feed';

/** What watch() needs of a response: its 'close' event, and no socket to end. */
function fakeResponse(): ServerResponse {
  return Object.assign(new EventEmitter(), { socket: null }) as unknown as ServerResponse;
}

describe('LiveFeed (the streams of GET /api/live/:productId)', () => {
  const redis = useTestRedis();
  const subscriptions: Subscription[] = [];
  afterEach(() => subscriptions.splice(0).forEach((s) => s.unsubscribe()));

  async function setUp(env: Record<string, string> = {}) {
    const client = redis.client();
    const { keys } = await startSaleIn(client, 10, 1, 'feed');
    const config = loadConfig({ REDIS_URL: redis.url(), ADMIN_TOKEN: 'a-long-enough-admin-token', ...env });
    const feed = new LiveFeed(
      config,
      client,
      keys,
      new SettlementLag(client, keys),
      new Escrow(
        client,
        keys,
        new ScriptedPurchases(client, keys, config),
        new FaultStop(null),
        new ReplicaAcks(client, keys, config),
      ),
    );
    let clients = 0;
    /** A stream of a new client each time, unless `client` is given. */
    const watch = (productId: string, client = `10.0.0.${++clients}`) => {
      const sub = feed.watch(productId, fakeResponse(), client).subscribe();
      subscriptions.push(sub);
      return sub;
    };
    return { client, feed, watch };
  }

  it(`polls at most ${MAX_WATCHED_PRODUCTS} products and holds at most ${MAX_STREAMS} streams, refusing more before any stream`, async () => {
    const { feed, watch } = await setUp();
    for (let i = 0; i < MAX_WATCHED_PRODUCTS; i++) watch(`made-up-${i}`);
    expect(() => feed.watch('one-more', fakeResponse(), 'someone')).toThrow(TooManyWatchersError);
    // A product already polled takes more watchers, up to the bound on streams.
    for (let i = MAX_WATCHED_PRODUCTS; i < MAX_STREAMS; i++) watch('made-up-0');
    expect(() => feed.watch('made-up-0', fakeResponse(), 'someone')).toThrow(TooManyWatchersError);
    // A stream asked for and never subscribed (the client left first) frees its place on close.
    subscriptions.pop()!.unsubscribe();
    const response = fakeResponse();
    feed.watch('made-up-0', response, 'someone');
    expect(() => feed.watch('made-up-0', fakeResponse(), 'someone-else')).toThrow(TooManyWatchersError);
    response.emit('close');
    // Every stream of one product ended: its place goes to another product.
    subscriptions.splice(1).forEach((s) => s.unsubscribe());
    subscriptions[0].unsubscribe();
    expect(() => watch('phone')).not.toThrow();
    try {
      feed.watch('x', fakeResponse(), 'someone');
    } catch (err) {
      expect(err).toMatchObject({ code: 'TOO_MANY_WATCHERS', status: 503 });
    }
  });

  it(`bounds one client to ${MAX_PRODUCTS_PER_CLIENT} products and ${MAX_STREAMS_PER_CLIENT} streams, whatever the instance's room`, async () => {
    const { feed, watch } = await setUp();
    for (let i = 0; i < MAX_PRODUCTS_PER_CLIENT; i++) watch(`p-${i}`, 'greedy');
    expect(() => feed.watch('one-more', fakeResponse(), 'greedy')).toThrow(/already watches 4 products/);
    for (let i = MAX_PRODUCTS_PER_CLIENT; i < MAX_STREAMS_PER_CLIENT; i++) watch('p-0', 'greedy');
    expect(() => feed.watch('p-0', fakeResponse(), 'greedy')).toThrow(/already holds 8 live streams/);
    expect(() => watch('one-more', 'modest')).not.toThrow();
    // Its streams end: its places come back, and its entry goes.
    subscriptions.splice(0, MAX_STREAMS_PER_CLIENT).forEach((s) => s.unsubscribe());
    expect(feed['clients'].has('greedy')).toBe(false);
    expect(() => watch('p-9', 'greedy')).not.toThrow();
  });

  it('reads a product without a sale once a second, one with a sale every tick', async () => {
    const { client, feed, watch } = await setUp();
    const polls = async (productId: string) => {
      watch(productId);
      clearInterval(feed['watches'].get(productId)!.timer);
      // The first read, sent at subscription; then four ticks' worth, well within a second.
      const before = await commandCalls(client, 'exec');
      await feed.read(productId);
      for (let i = 0; i < 4; i++) await feed['poll'](productId);
      return (await commandCalls(client, 'exec')) - before - 1;
    };
    expect(await polls('phone')).toBe(4);
    expect(await polls('no-sale-here')).toBe(0);
  });

  it("counts a bucketed product's unsettled orders in every bucket's log, not bucket 0's alone", async () => {
    // PostgreSQL is never reached: the lag is read from Redis (SettlementLag).
    const { client, feed } = await setUp({ DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' });
    const keys = feed['keys'];
    // phone sold from two buckets, phone and phone~1: entries no settler has read in each log.
    await resetPlainSale(client, keys.product('phone~1'), 10, 1);
    await client.hset(keys.product('phone').meta, 'buckets', 'phone~1');
    await client.xadd(keys.product('phone').orders, '*', 'orderId', 'phone.1');
    for (const order of ['phone~1.1', 'phone~1.2'])
      await client.xadd(keys.product('phone~1').orders, '*', 'orderId', order);
    // Bucket phone~1's lock held (by pid 4242), bucket 0's free: each bucket's own.
    await client.set(keys.product('phone~1').lock, '4242:0123456789abcdef0123456789abcdef', 'PX', 60_000);
    const event = await feed.read('phone');
    expect(event.buckets?.map((b) => b.id)).toEqual(['phone', 'phone~1']);
    expect(event.settlement).toEqual({ unsettled: 3, oldestMs: expect.any(Number) });
    expect(event.lock).toBeNull();
    expect(event.buckets?.map((b) => b.lock)).toEqual([null, { holderPid: 4242, ttlMs: expect.any(Number) }]);
  });
});
