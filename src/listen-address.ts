import type { AddressInfo } from 'node:net';

/**
 * Where the app listens, as the log says it: the address bound (HOST), and for the
 * wildcard addresses, which no browser can be sent to, a URL that reaches it from this
 * machine. (Nest's getUrl() names 127.0.0.1 for 0.0.0.0, as if only loopback were bound.)
 */
export function listeningOn({ address, family, port }: AddressInfo): string {
  const host = family === 'IPv6' ? `[${address}]` : address;
  if (address === '0.0.0.0') {
    return `${host}:${port} (every IPv4 address of this machine; from this machine: http://127.0.0.1:${port})`;
  }
  if (address === '::') {
    return `${host}:${port} (every address of this machine; from this machine: http://localhost:${port})`;
  }
  return `http://${host}:${port}`;
}
