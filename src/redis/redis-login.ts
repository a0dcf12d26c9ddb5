import { Redis, type RedisOptions } from 'ioredis';
import type { RedisConfig } from './redis.config';
import { COMMAND_TIMEOUT_MS } from './create-client';

/** A Redis the app logs in to, and the variable that says how. */
interface Login {
  readonly variable: string;
  readonly options: RedisOptions;
  /** A URL, parsed by ioredis as the app's own client parses it (query options included). */
  readonly url?: string;
}

/**
 * Why the app cannot log in to its Redis servers (REDIS_URL or REDIS_CLUSTER_NODES'
 * seeds, and REDLOCK_URLS' nodes): one line per variable (its first refused login),
 * naming the variable and its user, never its password; empty when every login works
 * or could not be tried. Asked once, before the app is built: a refused login never heals by itself
 * (the app's client would retry it forever, and after REDIS_READY_WAIT_MS the app would
 * listen, answering 503 to everyone, as if Redis were down), and asked on a connection
 * of its own, where ioredis sends no AUTH of its own: its handshake would print a
 * warning of its own to the console for a password the server does not ask for.
 * A Redis that does not answer proves nothing here: the app's client says so, and waits.
 */
export async function loginProblems(
  config: Pick<RedisConfig, 'redisUrl' | 'redisCluster'> & { readonly redlockUrls: readonly string[] },
): Promise<string[]> {
  const logins: Login[] = [
    ...(config.redisUrl ? [{ variable: 'REDIS_URL', url: config.redisUrl, options: {} }] : []),
    ...(config.redisCluster?.nodes ?? []).map(({ host, port }) => ({
      variable: 'REDIS_CLUSTER_NODES',
      options: {
        host,
        port,
        username: config.redisCluster!.username,
        password: config.redisCluster!.password,
        ...(config.redisCluster!.tls ? { tls: {} } : {}),
      },
    })),
    ...config.redlockUrls.map((url) => ({ variable: 'REDLOCK_URLS', url, options: {} })),
  ];
  const found = await Promise.all(logins.map(loginProblem));
  // One line per variable: a cluster's seeds share one login, and say the same.
  const lines = new Map<string, string>();
  found.forEach((line, i) => {
    if (line !== null && !lines.has(logins[i].variable)) lines.set(logins[i].variable, line);
  });
  return [...lines.values()];
}

async function loginProblem({ variable, url, options }: Login): Promise<string | null> {
  const probe = {
    ...options,
    lazyConnect: true,
    enableReadyCheck: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: COMMAND_TIMEOUT_MS,
    commandTimeout: COMMAND_TIMEOUT_MS,
    protocol: 2,
    disableClientInfo: true,
  } satisfies RedisOptions;
  const client = url ? new Redis(url, probe) : new Redis(probe);
  // The login is sent below, by us, so that its refusal comes back to us.
  const { username, password, host, port } = client.options;
  client.options.username = undefined;
  client.options.password = undefined;
  client.options.db = 0;
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch {
    return null;
  }
  const user = username || 'default';
  const at = `Redis at ${host}:${port}`;
  try {
    if (password) await (username ? client.auth(username, password) : client.auth(password));
    else await client.ping();
    return null;
  } catch (err) {
    const reply = (err as Error).message;
    if (/^WRONGPASS/.test(reply)) {
      return `${at} refused the login of ${variable}'s user "${user}": a wrong password, or no such user, or the user is disabled (WRONGPASS)`;
    }
    if (/^NOAUTH/.test(reply)) {
      return `${at} requires a password and ${variable} gives none for user "${user}": redis://<user>:<password>@${host}:${port} (NOAUTH)`;
    }
    // Redis 6+ says "called without any password configured for the default user"; 5 "no password is set".
    if (/without any password configured|no password is set/.test(reply)) {
      return `${variable} gives a password for user "${user}", but ${at} has none set: it may not be the Redis you meant; remove the password from ${variable}, or set one on that Redis (requirepass)`;
    }
    // Anything else (a user that may not PING) is for the start-up checks to name.
    return null;
  } finally {
    client.disconnect();
  }
}
