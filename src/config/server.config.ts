import { createServer, isIP } from 'node:net';
import { ConfigError, ConfigOf, defaulted, int, section, setting } from '../settings/setting';

const HOST_RULE = 'must be an address or host name to listen on';

/** The HTTP server's own settings, read by the app shell (create-app.ts, main.ts). */
export const SERVER_CONFIG = section('server', {
  port: int('PORT', 3000, [0, 65_535], 'HTTP port'),
  host: defaulted(
    'HOST',
    '0.0.0.0',
    "address to listen on: an IP address of this machine, or a name that resolves to one (checked at boot, as a bad variable); `0.0.0.0` is every IPv4 address, `::` every address. The log's `seckill listening on ...` says the address bound and, for those two, a URL that reaches it from this machine",
    (value): string => {
      if (!/^[A-Za-z0-9.:_-]+$/.test(value)) throw new ConfigError('HOST', `${HOST_RULE}, got "${value}"`);
      return value;
    },
  ),
  trustProxy: setting(
    'TRUST_PROXY',
    'unset',
    "which proxies' `X-Forwarded-For` names the client (Fastify's `trustProxy`): `true` (any: only behind a proxy that overwrites it), a hop count (`1`: the address the one proxy in front appended), or addresses, CIDRs, `loopback`, `linklocal`, `uniquelocal`. Unset, the client is the socket's peer. The live streams' per-client bounds count by it; a request's `X-Request-Id` is taken only from a peer it trusts ([API](api.md)); the compose `scale` profile sets `1`",
    trustProxy,
  ),
  // Node checks request deadlines once a second (create-app.ts), so less than a
  // second would not be kept; no upper limit would let a slow client hold a socket forever.
  requestTimeoutMs: int(
    'REQUEST_TIMEOUT_MS',
    10_000,
    [1_000, 600_000],
    'how long a client may take to send a whole request, headers and body, before 408 `REQUEST_TIMEOUT`, checked once a second',
  ),
  // Below `docker stop`'s 10 s, so the app exits on its own before SIGKILL; above the
  // default LOCK_WAIT_MS, so a buyer waiting for the lock at SIGTERM usually hears 201 or
  // LOCK_TIMEOUT first (one still in progress at the deadline hears OUTCOME_UNKNOWN).
  shutdownTimeoutMs: int(
    'SHUTDOWN_TIMEOUT_MS',
    8_000,
    [100, 600_000],
    'after SIGTERM/SIGINT, the longest the app drains before it answers what is left (408 for a request still arriving, 503 `OUTCOME_UNKNOWN` for one in progress) and exits: 0 if only slow clients were cut, 1 if a request in progress was ([Shutdown](deployment.md#shutdown))',
  ),
});
export type ServerConfig = ConfigOf<typeof SERVER_CONFIG>;

/**
 * TRUST_PROXY: false (unset: the client is the socket's peer), true (any: only behind a
 * proxy that overwrites the header), a hop count, or addresses, CIDRs and proxy-addr's
 * keywords (loopback, linklocal, uniquelocal).
 */
function trustProxy(raw: string | undefined): boolean | number | readonly string[] {
  const value = raw?.toLowerCase();
  if (value === undefined || value === 'false' || value === '0') return false;
  if (value === 'true') return true;
  if (/^\d{1,2}$/.test(value)) return Number(value);
  const entries = value.split(',').map((e) => e.trim());
  const keyword = /^(loopback|linklocal|uniquelocal)$/;
  // An address as Node reads one (isIP), and a range's bits within its family's: what
  // the proxy check's BlockList (src/trusted-proxy.ts) takes.
  const usable = (entry: string) => {
    const [address, bits, more] = entry.split('/');
    const family = isIP(address);
    if (family === 0 || more !== undefined) return false;
    return bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128));
  };
  const bad = entries.find((e) => !keyword.test(e) && !usable(e));
  if (bad !== undefined) {
    throw new ConfigError(
      'TRUST_PROXY',
      `must be true, false, a hop count, or a comma-separated list of addresses, CIDRs, loopback, linklocal or uniquelocal; got "${bad}"`,
    );
  }
  return entries;
}

/**
 * Why this machine cannot listen on `host`, or null: asked by listening on a free port
 * of it for a moment, which resolves the name and binds the address as listen() will.
 */
export async function listenProblem(host: string): Promise<ConfigError | null> {
  const server = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, host, resolve);
    });
    return null;
  } catch (err) {
    const { code, message } = err as NodeJS.ErrnoException;
    const why =
      code === 'ENOTFOUND' || code === 'EAI_AGAIN'
        ? 'a name that does not resolve'
        : code === 'EADDRNOTAVAIL'
          ? 'not an address of this machine'
          : message;
    return new ConfigError('HOST', `${HOST_RULE}, got "${host}" (${why})`);
  } finally {
    server.close();
  }
}
