import { Logger } from '@nestjs/common';
import { Redis } from 'ioredis';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { APP_CWD, APP_MAIN } from '../harness/paths';
import { findRedisCli, findRedisServer, freePort, startRedis } from '../scripts/redis-server';
import { closeRedisClient, createRedisCluster } from '../src/redis/create-client';
import { KeyLayout } from '../src/redis/key-layout';
import { ADMIN_TOKEN, request, startSale } from './helpers/app';
import { readSlotMap, SlotMap, uniquePrefix } from './helpers/redis';

/**
 * A Redis Cluster over TLS whose one certificate names its nodes by host name only
 * (SAN DNS:localhost, no IP), as a certificate from a public or company CA does. The
 * nodes announce that name (cluster-announce-hostname, cluster-preferred-endpoint-type
 * hostname), and the app, given `rediss://localhost:port` seeds and the CA through
 * NODE_EXTRA_CA_CERTS, must reach every node by that name.
 */
let dir: string;
let ca: string;
let nodes: { port: number; stop(): Promise<void> }[] = [];
let seeds: string;
/** `localhost:port` of the master serving each slot, from the cluster itself. */
let slots: SlotMap;
let masters: string[];

/** A connection to one node over TLS, trusting the test CA and checking the name. */
function nodeClient(port: number): Redis {
  return new Redis({ host: 'localhost', port, tls: { ca }, lazyConnect: true, maxRetriesPerRequest: 0 });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'seckill-cluster-tls-'));
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  openssl(
    ...['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=seckill test CA'],
    ...['-keyout', 'ca.key', '-out', 'ca.crt'],
  );
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', 'node.key', '-out', 'node.csr');
  writeFileSync(join(dir, 'san.cnf'), 'subjectAltName=DNS:localhost\n');
  openssl(
    ...['x509', '-req', '-in', 'node.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial'],
    ...['-days', '1', '-extfile', 'san.cnf', '-out', 'node.crt'],
  );
  ca = readFileSync(join(dir, 'ca.crt'), 'utf8');

  nodes = await Promise.all(
    [0, 1, 2].map(async (i) => {
      const port = await freePort();
      return startRedis({
        dir: join(dir, String(i)),
        port,
        appendonly: false,
        cluster: { busPort: await freePort() },
        extraArgs: [
          // TLS only: no plain-text port.
          ...['--port', '0', '--tls-port', String(port)],
          ...['--tls-cert-file', join(dir, 'node.crt'), '--tls-key-file', join(dir, 'node.key')],
          ...['--tls-ca-cert-file', join(dir, 'ca.crt'), '--tls-auth-clients', 'no'],
          ...['--tls-cluster', 'yes', '--tls-replication', 'yes'],
          ...['--cluster-announce-hostname', 'localhost', '--cluster-preferred-endpoint-type', 'hostname'],
        ],
      });
    }),
  );
  const create = spawnSync(
    findRedisCli(findRedisServer() ?? undefined),
    [
      ...['--tls', '--cacert', join(dir, 'ca.crt'), '--cluster', 'create'],
      ...nodes.map((n) => `localhost:${n.port}`),
      '--cluster-yes',
    ],
    { encoding: 'utf8' },
  );
  if (create.status !== 0) throw new Error(`redis-cli --cluster create failed:\n${create.stdout}${create.stderr}`);
  await waitForClusterOk();

  const admin = nodeClient(nodes[0].port);
  try {
    slots = await readSlotMap(admin);
    masters = [...slots.masters];
  } finally {
    admin.disconnect();
  }
  seeds = nodes.map((n) => `rediss://localhost:${n.port}`).join(',');
}, 60_000);

afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/**
 * The built app as a process of its own (NODE_EXTRA_CA_CERTS is read only at a process's
 * start), resolved once it listens: main.ts listens once every master's connection is up,
 * or after 10 s without. Not harness/processes.ts's startApp, which waits for /health.
 */
async function startAppProcess(
  env: Record<string, string>,
): Promise<{ url: string; output(): string; stop(): Promise<void> }> {
  const port = await freePort();
  const child = spawn(process.execPath, [APP_MAIN], {
    cwd: APP_CWD,
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const app = {
    url: `http://127.0.0.1:${port}`,
    output: () => output,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
  const deadline = Date.now() + 20_000;
  while (
    !(await fetch(`${app.url}/health`).then(
      () => true,
      () => false,
    ))
  ) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await app.stop();
      throw new Error(`the app did not listen:\n${output}`);
    }
    await sleep(50);
  }
  return app;
}

async function waitForClusterOk(): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const states = await Promise.all(
      nodes.map(async (n) => {
        const c = nodeClient(n.port);
        try {
          return /cluster_state:ok/.test(String(await c.call('CLUSTER', 'INFO')));
        } catch {
          return false;
        } finally {
          c.disconnect();
        }
      }),
    );
    if (states.every(Boolean)) return;
    if (Date.now() > deadline) throw new Error('the TLS cluster did not reach cluster_state:ok within 30 s');
    await sleep(100);
  }
}

function productsOnEveryShard(keys: KeyLayout): string[] {
  return slots.productsOnEveryShard(keys);
}

describe('Redis Cluster over TLS, certificate for a host name only', () => {
  it('the nodes announce the name on their certificate, which names no IP', () => {
    expect(new Set(masters).size).toBe(3);
    expect(masters.every((m) => m.startsWith('localhost:'))).toBe(true);
    const san = execFileSync('openssl', ['x509', '-in', join(dir, 'node.crt'), '-noout', '-ext', 'subjectAltName']);
    expect(String(san)).not.toMatch(/IP/);
  });

  it('the app (rediss://localhost seeds, CA in NODE_EXTRA_CA_CERTS) serves products on every shard', async () => {
    const prefix = uniquePrefix('tls');
    const app = await startAppProcess({
      REDIS_CLUSTER_NODES: seeds,
      NODE_EXTRA_CA_CERTS: join(dir, 'ca.crt'),
      ADMIN_TOKEN,
      KEY_PREFIX: prefix,
      LOG_LEVEL: 'warn',
    });
    try {
      const products = productsOnEveryShard(new KeyLayout(prefix));
      expect(products).toHaveLength(3);
      for (const id of products) {
        await startSale(app.url, id, 2, 1);
        const order = await request(app.url, 'POST', '/api/orders', {
          json: { productId: id, userId: 'buyer-1', quantity: 1 },
        });
        expect([id, order.status, order.body.code]).toEqual([id, 201, undefined]);
        const product = await request(app.url, 'GET', `/api/products/${id}`);
        expect([id, product.status, product.body.stock]).toEqual([id, 200, 1]);
      }
      // Nothing about the nodes was logged: the app reached each one at the first try.
      expect(app.output()).not.toMatch(/unavailable/);
    } finally {
      await app.stop();
    }
  }, 60_000);

  // With TLS only (port 0) CLUSTER SHARDS names a node's `tls-port`, not `port`: /health
  // once looked for "localhost:undefined" and called every master down.
  it('/health is 200 with every master up', async () => {
    const app = await startAppProcess({
      REDIS_CLUSTER_NODES: seeds,
      NODE_EXTRA_CA_CERTS: join(dir, 'ca.crt'),
      ADMIN_TOKEN,
      LOG_LEVEL: 'warn',
    });
    try {
      const health = await request(app.url, 'GET', '/health');
      expect(health.body).toMatchObject({
        status: 'ok',
        redis: 'up',
        cluster: { state: 'ok', slotsCovered: 16_384 },
      });
      expect(health.status).toBe(200);
    } finally {
      await app.stop();
    }
  }, 60_000);

  it('says why the nodes failed when the cluster cannot load its slot map (here: an untrusted certificate)', async () => {
    // This test process does not trust the test CA: every node's handshake fails.
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const client = createRedisCluster(
      { nodes: nodes.map((n) => ({ host: 'localhost', port: n.port })), tls: true },
      'untrusted',
    );
    try {
      const deadline = Date.now() + 10_000;
      const said = () => warn.mock.calls.map(([message]) => String(message));
      while (!said().some((m) => m.startsWith('unavailable:')) && Date.now() < deadline) await sleep(50);
      const line = said().find((m) => m.startsWith('unavailable:'));
      // Each node's last reason is listed; on a loaded machine one handshake can end
      // another way first (once: "tlsv1 alert decode error"), so the certificate is looked
      // for among them, not only first.
      expect(line).toMatch(
        /^unavailable: Failed to refresh slots cache\. \((.*; )?localhost:\d+: self-signed certificate/,
      );
    } finally {
      await closeRedisClient(client);
      warn.mockRestore();
    }
  });
});
