import { BlockList, isIPv6 } from 'node:net';
import type { AppConfig } from './config/app-config';

/**
 * Whether the proxy `hop` steps from the app (0: the socket's peer) at `address` is
 * believed when it names who sent it the request: Fastify's trustProxy function, which
 * it calls along X-Forwarded-For.
 */
export type ProxyTrust = (address: string, hop: number) => boolean;

/** The ranges TRUST_PROXY's keywords name: proxy-addr's, which Fastify's trustProxy reads. */
const KEYWORDS: Readonly<Record<string, readonly string[]>> = {
  loopback: ['127.0.0.1/8', '::1/128'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
  uniquelocal: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
};

/**
 * TRUST_PROXY as one function, for Fastify (who the client is: request.ip) and for
 * what else only a trusted proxy may say (X-Request-Id): `false` trusts nobody, `true`
 * everybody, a hop count the first that many, a list the addresses in it (Node's
 * BlockList, which matches an IPv4-mapped IPv6 peer against an IPv4 range, as
 * proxy-addr does).
 */
export function proxyTrust(setting: AppConfig['trustProxy']): ProxyTrust {
  if (typeof setting === 'boolean') return () => setting;
  if (typeof setting === 'number') return (_address, hop) => hop < setting;
  const trusted = new BlockList();
  for (const entry of setting.flatMap((e) => KEYWORDS[e] ?? [e])) {
    const [address, bits] = entry.split('/');
    const family = isIPv6(address) ? 'ipv6' : 'ipv4';
    try {
      if (bits === undefined) trusted.addAddress(address, family);
      else trusted.addSubnet(address, Number(bits), family);
    } catch {
      throw new Error(`TRUST_PROXY: "${entry}" is not an IP address or a CIDR range`);
    }
  }
  return (address) => trusted.check(address, isIPv6(address) ? 'ipv6' : 'ipv4');
}

/** The trustProxy option Fastify gets: its own fast paths for a boolean or a hop count, the function for a list. */
export function fastifyTrustProxy(setting: AppConfig['trustProxy']): boolean | number | ProxyTrust {
  return typeof setting === 'boolean' || typeof setting === 'number' ? setting : proxyTrust(setting);
}
