import { ReplyError } from 'ioredis';
import type { RedisClient } from './create-client';
import type { KeyLayout } from './key-layout';
import { permissionCheck } from './lua-scripts';

/**
 * Which of the commands the app needs the Redis user may not run (ACL), asked once at
 * start-up: a user without SPUBLISH (Redis 7's `acl-pubsub-default resetchannels`)
 * would fail every lock release after its DEL, one without XADD every order after its
 * DECRBY. Each command is tried for real, on throwaway keys under the app's prefix (a
 * product id no buyer can name), so the answer is this user's, whatever its rules.
 * Returns one line naming what is missing, or null when nothing is.
 */
export async function permissionProblem(client: RedisClient, keys: KeyLayout): Promise<string | null> {
  const k = keys.product('~permission-check');
  const scriptKeys: [string, string, string] = [k.stock, k.meta, k.orders];
  const channel = `${k.lock}:released`;
  const denied: string[] = [];
  const tryIt = async (name: string, run: () => Promise<unknown>): Promise<unknown> => {
    try {
      return await run();
    } catch (err) {
      if (err instanceof ReplyError && (err as Error).message.startsWith('NOPERM')) denied.push(name);
      else throw err;
      return undefined;
    }
  };
  await tryIt('PING', () => client.ping());
  await tryIt('INFO', () => client.info('server'));
  await tryIt('MULTI/EXEC', () => client.multi().xlen(k.orders).exec());
  // The script, sent whole (EVAL), then by its hash (EVALSHA) as LuaScript.run sends it.
  const inScript = (await tryIt('EVAL', () => permissionCheck.runInFull(client, scriptKeys, channel))) as
    string[] | undefined;
  await tryIt('EVALSHA', () => client.evalsha(permissionCheck.sha1, 3, ...scriptKeys, channel));
  denied.push(...(inScript ?? []));
  if (denied.length === 0) return null;
  return (
    `the Redis user may not run ${denied.join(', ')} on keys and shard channels under "${keys.prefix}" ` +
    '(NOPERM); seckill needs them all: see the least-privilege ACL SETUSER line in docs/deployment.md'
  );
}
