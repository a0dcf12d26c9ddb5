import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { Subscription } from 'rxjs';
import { commandCalls, startSaleIn, useTestRedis } from '../../test/helpers/redis';
import { loadConfig } from '../config/app-config';
import { TooManyWatchersError } from '../errors/errors';
import { LiveFeed, MAX_STREAMS, MAX_WATCHED_PRODUCTS } from './live-feed';

/** What watch() needs of a response: its 'close' event, and no socket to end. */
function fakeResponse(): ServerResponse {
  return Object.assign(new EventEmitter(), { socket: null }) as unknown as ServerResponse;
}

describe('LiveFeed (the streams of GET /api/live/:productId)', () => {
  const redis = useTestRedis();
  const subscriptions: Subscription[] = [];
  afterEach(() => subscriptions.splice(0).forEach((s) => s.unsubscribe()));

  async function setUp() {
    const client = redis.client();
    const { keys } = await startSaleIn(client, 10, 1, 'feed');
    const feed = new LiveFeed(
      loadConfig({ REDIS_URL: redis.url(), ADMIN_TOKEN: 'a-long-enough-admin-token' }),
      client,
      keys,
    );
    const watch = (productId: string) => {
      const sub = feed.watch(productId, fakeResponse()).subscribe();
      subscriptions.push(sub);
      return sub;
    };
    return { client, feed, watch };
  }

  it(`polls at most ${MAX_WATCHED_PRODUCTS} products and holds at most ${MAX_STREAMS} streams, refusing more before any stream`, async () => {
    const { feed, watch } = await setUp();
    for (let i = 0; i < MAX_WATCHED_PRODUCTS; i++) watch(`made-up-${i}`);
    expect(() => feed.watch('one-more', fakeResponse())).toThrow(TooManyWatchersError);
    // A product already polled takes more watchers, up to the bound on streams.
    for (let i = MAX_WATCHED_PRODUCTS; i < MAX_STREAMS; i++) watch('made-up-0');
    expect(() => feed.watch('made-up-0', fakeResponse())).toThrow(TooManyWatchersError);
    // A stream asked for and never subscribed (the client left first) frees its place on close.
    subscriptions.pop()!.unsubscribe();
    const response = fakeResponse();
    feed.watch('made-up-0', response);
    expect(() => feed.watch('made-up-0', fakeResponse())).toThrow(TooManyWatchersError);
    response.emit('close');
    // Every stream of one product ended: its place goes to another product.
    subscriptions.splice(1).forEach((s) => s.unsubscribe());
    subscriptions[0].unsubscribe();
    expect(() => watch('phone')).not.toThrow();
    try {
      feed.watch('x', fakeResponse());
    } catch (err) {
      expect(err).toMatchObject({ code: 'TOO_MANY_WATCHERS', status: 503 });
    }
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
});
