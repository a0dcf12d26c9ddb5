import { ReplyError } from 'ioredis';
import { closeRedisClient, duplicateClient, whenReady, type RedisClient } from './create-client';
import type { KeyLayout } from './key-layout';
import { permissionCheck, permissionCheckKeys } from './lua-scripts';

/** How long the check waits for its own connections (WATCH, SSUBSCRIBE). */
const PROBE_CONNECT_MS = 5_000;

/**
 * Which of the commands the app sends the Redis user may not run (ACL), asked once at
 * start-up: a user without SPUBLISH (Redis 7's `acl-pubsub-default resetchannels`)
 * would fail every lock release after its DEL, one without XADD every order after its
 * DECRBY, one without WATCH every `optimistic` purchase while /health says ok. Each
 * command is tried for real, on throwaway keys and a shard channel under the app's
 * prefix (a product id no buyer can name), so the answer is this user's, whatever its
 * rules: the scripts' commands inside one script (permission-check-4.lua), the rest as
 * the app sends them (the live feed's reads, MULTI/EXEC, WATCH and SSUBSCRIBE on
 * connections of their own, WAIT when REDIS_WAIT_REPLICAS asks for it).
 * Returns one line naming what is missing, or null when nothing is.
 */
export async function permissionProblem(
  client: RedisClient,
  keys: KeyLayout,
  options: {
    readonly waitReplicas?: number;
    /** DATABASE_URL: this instance settles (the consumer group's commands). */
    readonly settle?: boolean;
    /** A settler elsewhere marked the prefix: this instance's resets make the group (XGROUP CREATE). */
    readonly makesGroups?: boolean;
  } = {},
): Promise<string | null> {
  const k = keys.product('~permission-check');
  const scriptKeys = permissionCheckKeys(k);
  const channel = `${k.lock}:released`;
  const denied = new Set<string>();
  /**
   * Runs `run`; a NOPERM is noted under the command it names, or `name`. Any other
   * error reply (NOGROUP on a stream whose group the user may not create, WRONGTYPE)
   * comes after the ACL let the command through: allowed, as far as this check asks.
   */
  const tryIt = async <T>(name: string, run: () => Promise<T>): Promise<T | undefined> => {
    try {
      return await run();
    } catch (err) {
      const refusals = [err, ...((err as { previousErrors?: unknown[] }).previousErrors ?? [])].filter(
        (e): e is Error => e instanceof ReplyError && (e as Error).message.startsWith('NOPERM'),
      );
      if (refusals.length === 0 && err instanceof ReplyError) return undefined;
      if (refusals.length === 0) throw err;
      for (const refusal of refusals) {
        denied.add(/run the '([^']+)' command/.exec(refusal.message)?.[1]?.toUpperCase() ?? name);
      }
      return undefined;
    }
  };
  await tryIt('PING', () => client.ping());
  await tryIt('INFO', () => client.info('server'));
  await tryIt('CLIENT|SETNAME', () => client.call('CLIENT', 'SETNAME', 'seckill'));
  // The reads the purchase paths, GET /api/products, a close and the live feed send, in a
  // MULTI as the feed does (a refused one aborts it; its error names the command).
  await tryIt('MULTI/EXEC', () =>
    client
      .multi()
      .hmget(k.meta, 'x')
      .get(k.stock)
      .hgetall(k.live)
      .pttl(k.lock)
      .xlen(k.orders)
      .hlen(k.states)
      // A close's look for the reservations to cancel (ProductsService.closeSale).
      .hscan(k.states, 0)
      .zrangebyscore(k.deadlines, '-inf', 0)
      .exec(),
  );
  // The products' list (an admin's GET /api/products pages it) and Redis's clock.
  const list = `${keys.prefix}~permission-check`;
  await tryIt('SADD', () => client.sadd(list, 'x'));
  // A product's DELETE takes it out of the list.
  await tryIt('SREM', () => client.srem(list, 'y'));
  await tryIt('SSCAN', () => client.sscan(list, 0));
  await tryIt('TIME', () => client.time());
  await tryIt('DEL', () => client.del(list));
  // With DATABASE_URL: the settler's consumer group, on a throwaway stream.
  if (options.settle) {
    await tryIt('XGROUP|CREATE', () => client.xgroup('CREATE', k.orders, 'settle', '0', 'MKSTREAM'));
    await tryIt('XREADGROUP', () =>
      client.xreadgroup('GROUP', 'settle', 'check', 'COUNT', 1, 'STREAMS', k.orders, '>'),
    );
    await tryIt('XAUTOCLAIM', () => client.call('XAUTOCLAIM', k.orders, 'settle', 'check', 0, '0-0', 'COUNT', 1));
    await tryIt('XACK', () => client.xack(k.orders, 'settle', '0-1'));
    await tryIt('XPENDING', () => client.xpending(k.orders, 'settle'));
    await tryIt('XINFO|GROUPS', () => client.xinfo('GROUPS', k.orders));
    await tryIt('XRANGE', () => client.xrange(k.orders, '-', '+', 'COUNT', 1));
    // The settler's cleanup of consumers gone (settle-drained-1.lua) and its read of the shards' marks.
    await tryIt('XINFO|CONSUMERS', () => client.xinfo('CONSUMERS', k.orders, 'settle'));
    await tryIt('XGROUP|DELCONSUMER', () => client.xgroup('DELCONSUMER', k.orders, 'settle', 'check'));
    await tryIt('ZRANGE', () => client.zrange(k.deadlines, '0', '0', 'WITHSCORES'));
    await tryIt('DEL', () => client.del(k.orders));
  }
  // The script, sent whole (EVAL), then by its hash (EVALSHA) as LuaScript.run sends it.
  const settle = options.settle || options.makesGroups ? '1' : '0';
  const inScript = await tryIt('EVAL', () => permissionCheck.runInFull(client, scriptKeys, channel, settle));
  await tryIt('EVALSHA', () =>
    client.evalsha(permissionCheck.sha1, permissionCheck.numberOfKeys, ...scriptKeys, channel, settle),
  );
  for (const command of inScript ?? []) denied.add(command);
  if ((options.waitReplicas ?? 0) > 0) await tryIt('WAIT', () => client.call('WAIT', '0', '0'));
  await onItsOwn(client, {}, async (c) => {
    await tryIt('WATCH', () => c.watch(k.stock));
    await tryIt('UNWATCH', () => c.unwatch());
  });
  await onItsOwn(client, { shardedSubscribers: true }, async (c) => {
    await tryIt('SSUBSCRIBE', () => c.ssubscribe(channel));
    await tryIt('SUNSUBSCRIBE', () => c.sunsubscribe(channel));
  });
  if (denied.size === 0) return null;
  return (
    `the Redis user may not run ${[...denied].join(', ')} on keys and shard channels under "${keys.prefix}" ` +
    '(NOPERM); seckill needs them all: see the least-privilege ACL SETUSER lines, per feature, in docs/deployment.md'
  );
}

/** Runs `probe` on a connection of its own (a WATCH or a subscription changes its connection's state), then closes it. */
async function onItsOwn(
  client: RedisClient,
  clusterOptions: { shardedSubscribers?: boolean },
  probe: (c: RedisClient) => Promise<void>,
): Promise<void> {
  const own = duplicateClient(
    client,
    { enableAutoPipelining: false, enableReadyCheck: false },
    'Permission check',
    clusterOptions,
  );
  try {
    if (await whenReady(own, PROBE_CONNECT_MS)) await probe(own);
  } finally {
    await closeRedisClient(own);
  }
}
