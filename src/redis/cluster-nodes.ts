import { ConfigError } from '../settings/setting';
import { checkRedisUrl } from './redis-url';

/** Where a Redis Cluster's seed nodes are and how to log in to every node (REDIS_CLUSTER_NODES). */
export interface RedisClusterConfig {
  /** Seed nodes: the client learns the rest (masters, replicas, slots) from them. */
  readonly nodes: readonly { readonly host: string; readonly port: number }[];
  readonly username?: string;
  readonly password?: string;
  /** rediss:// entries: TLS to every node. */
  readonly tls: boolean;
}

/**
 * `host:port,host:port` or `redis[s]://[user:password@]host:port,...`: the seed nodes
 * of a Redis Cluster. Credentials and TLS apply to every node the client finds, so
 * the URL entries must agree on them.
 */
export function redisCluster(value: string): RedisClusterConfig {
  const name = 'REDIS_CLUSTER_NODES';
  const entries = value.split(',').map((e) => e.trim());
  if (entries.includes('')) throw new ConfigError(name, `has an empty entry: "${value}"`);
  const parsed = entries.map((entry) => {
    const hasScheme = /^[a-z]+:\/\//i.test(entry);
    // `::1:7000` cannot say where the address ends and the port begins.
    const ipv6 = /^(.*:.*):(\d+)$/.exec(hasScheme ? entry.replace(/^[a-z]+:\/\/([^@/]*@)?/i, '') : entry);
    if (ipv6 && !ipv6[1].startsWith('[')) {
      throw new ConfigError(name, `entry "${entry}": write an IPv6 address in brackets, [${ipv6[1]}]:${ipv6[2]}`);
    }
    const url = checkRedisUrl(name, hasScheme ? entry : `redis://${entry}`);
    const { protocol, hostname, port, username, password, pathname, search } = new URL(url);
    if (!port || !/^\d+$/.test(port)) throw new ConfigError(name, `entry "${entry}" needs a port (host:port)`);
    // The URL parser takes 0 (but not 65536): no node listens there.
    if (Number(port) === 0) throw new ConfigError(name, `entry "${entry}" has port 0: a port is 1-65535`);
    if (pathname !== '' && pathname !== '/' && pathname !== '/0') {
      throw new ConfigError(name, `entry "${entry}" names a database: a Redis Cluster has only database 0`);
    }
    // ioredis reads options such as ?password= from a standalone URL; here they would be dropped.
    if (search !== '') {
      throw new ConfigError(
        name,
        `entry "${entry}" has a query string: give the login as redis://user:password@host:port`,
      );
    }
    let login: { username: string; password: string };
    try {
      login = { username: decodeURIComponent(username), password: decodeURIComponent(password) };
    } catch {
      throw new ConfigError(
        name,
        `entry "${entry}" has a malformed %-escape in its user or password: write % as %25 (and @ as %40, : as %3A)`,
      );
    }
    return {
      // Host names are case-insensitive, and the URL parser keeps a redis:// host's case.
      node: { host: hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase(), port: Number(port) },
      login: `${protocol}|${login.username}|${login.password}`,
      tls: protocol === 'rediss:',
      ...login,
    };
  });
  // A bare host:port carries no login: it takes the one the URL entries give, if any.
  const logins = new Set(parsed.filter((_, i) => /^[a-z]+:\/\//i.test(entries[i])).map((p) => p.login));
  if (logins.size > 1) {
    throw new ConfigError(name, 'entries disagree on the scheme, user or password: every node is reached the same way');
  }
  const keys = parsed.map((p) => `${p.node.host}:${p.node.port}`);
  if (new Set(keys).size !== keys.length) throw new ConfigError(name, 'lists the same node twice');
  const first = parsed.find((_, i) => /^[a-z]+:\/\//i.test(entries[i])) ?? parsed[0];
  return {
    nodes: parsed.map((p) => p.node),
    ...(first.username ? { username: first.username } : {}),
    ...(first.password ? { password: first.password } : {}),
    tls: first.tls,
  };
}
