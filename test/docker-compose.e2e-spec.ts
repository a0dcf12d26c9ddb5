import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parse } from 'yaml';
import { findRedisServer, freePort } from '../scripts/redis-server';
import { CONFIG_DEFAULTS, CONFIG_ENV_NAMES, loadConfig } from '../src/config/app-config';

/**
 * Docker cannot run here, so the file itself is checked: the default services against
 * the config schema as before, the `cluster` and `scale` profiles for what makes them
 * work (docs/scaling.md), and the cluster's node config and init script against six
 * real redis-server processes.
 */
const ROOT = join(__dirname, '..');
const read = (file: string): string => readFileSync(join(ROOT, file), 'utf8');

interface Service {
  readonly image?: string;
  readonly build?: string;
  readonly profiles?: string[];
  readonly command?: string[];
  readonly environment?: Record<string, string>;
  readonly ports?: string[];
  readonly volumes?: string[];
  readonly depends_on?: Record<string, { condition: string }>;
  readonly networks?: string[] | Record<string, { ipv4_address?: string } | null>;
  readonly restart?: string;
  readonly healthcheck?: { readonly test?: string[] };
}
interface Compose {
  readonly services: Record<string, Service>;
  readonly networks?: Record<string, { ipam?: { config?: { subnet: string }[] } }>;
  readonly volumes?: Record<string, unknown>;
}

// Compose honours YAML merge keys (`<<: *app-env`); the yaml package only when asked.
const compose = parse(read('docker-compose.yml'), { merge: true }) as Compose;
const services = compose.services;
const service = (name: string): Service => {
  const found = services[name];
  if (!found) throw new Error(`docker-compose.yml has no service ${name}`);
  return found;
};
const inProfile = (profile: string): string[] =>
  Object.keys(services).filter((name) => services[name].profiles?.includes(profile));
const APP_SERVICES = Object.keys(services).filter((name) => services[name].build === '.');

/** A service's environment as compose gives it: ${VAR:-default} -> default; ${VAR:?msg} -> a value the user must give. */
function resolvedEnv(name: string): Record<string, string> {
  return Object.fromEntries(
    Object.entries(service(name).environment ?? {}).map(([key, value]) => [
      key,
      String(value)
        .replace(/\$\{\w+:-([^}]*)\}/g, '$1')
        .replace(/\$\{\w+:\?[^}]*\}/g, 'a-token-the-user-supplies'),
    ]),
  );
}

/** The repo file a service mounts at `target` (a `./file:target[:ro]` volume). */
function mountedFile(name: string, target: string): string {
  const volume = (service(name).volumes ?? []).find((v) => v.split(':')[1] === target);
  if (!volume) throw new Error(`${name} mounts nothing at ${target}`);
  const source = volume.split(':')[0];
  expect(source).toMatch(/^\.\//);
  return read(source);
}

/** `directive value` lines of a redis.conf, comments left out. */
function redisConf(text: string): Record<string, string> {
  return Object.fromEntries(
    text
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#'))
      .map((line) => [line.split(/\s+/)[0], line.split(/\s+/).slice(1).join(' ')]),
  );
}

/** Every Redis of the compose file: docs/development.md, "Versions, and why", says why this tag. */
const REDIS_IMAGE = 'redis:7.2';

describe('docker-compose.yml: the default services', () => {
  it('without a profile are exactly redis, postgres and app', () => {
    const always = Object.keys(services).filter((name) => services[name].profiles === undefined);
    expect(always.sort()).toEqual(['app', 'postgres', 'redis']);
  });

  it('runs the official PostgreSQL image, unpublished, behind a required password, and the app settles into it', () => {
    const pg = service('postgres');
    expect(pg.image).toMatch(/^postgres:\d+$/);
    expect(pg.ports).toBeUndefined();
    expect(pg.environment?.POSTGRES_PASSWORD).toMatch(/^\$\{POSTGRES_PASSWORD:\?[^}]+\}$/);
    expect(pg.healthcheck?.test).toEqual(expect.arrayContaining(['pg_isready']));
    expect(resolvedEnv('app').DATABASE_URL).toBe('postgres://seckill:a-token-the-user-supplies@postgres:5432/seckill');
    expect(service('app').depends_on).toHaveProperty('postgres');
    expect(loadConfig(resolvedEnv('app')).databaseUrl).toMatch(/^postgres:\/\/seckill:/);
  });

  it('runs the official Redis image with AOF on, published on loopback only, behind a required password', () => {
    // A minor version, not `redis:7` (which floats to 7.4 and whatever comes next), and
    // at least the app's minimum (src/redis/redis-version.ts).
    expect(service('redis').image).toBe(REDIS_IMAGE);
    // Docker's port rules bypass the host firewall: never every interface.
    expect(service('redis').ports).toEqual(['127.0.0.1:6379:6379']);
    const command = service('redis').command ?? [];
    expect(command.join(' ')).toContain('--appendonly yes');
    // Required, from the environment: compose stops when it is unset (`:?`).
    expect(command[command.indexOf('--requirepass') + 1]).toMatch(/^\$\{REDIS_PASSWORD:\?[^}]+\}$/);
    expect(service('redis').environment?.REDISCLI_AUTH).toMatch(/^\$\{REDIS_PASSWORD:\?[^}]+\}$/);
  });

  it('publishes no Redis of any profile on an address other than loopback', () => {
    for (const [name, s] of Object.entries(services)) {
      if (!s.image?.startsWith('redis:')) continue;
      for (const port of s.ports ?? [])
        expect({ name, port }).toEqual({ name, port: expect.stringMatching(/^127\.0\.0\.1:/) });
    }
  });

  it('gives app only variables the config knows, pointing at the redis service', () => {
    const env = resolvedEnv('app');
    // The same set as before the profiles: nothing a profile needs leaks into app.
    expect(Object.keys(env).sort()).toEqual([
      'ADMIN_TOKEN',
      'DATABASE_URL',
      'KEY_PREFIX',
      'LOCK_STRATEGY',
      'LOCK_TTL_MS',
      'LOCK_WAIT_MS',
      'LOG_LEVEL',
      'PORT',
      'REDIS_URL',
    ]);
    for (const name of Object.keys(env)) expect(CONFIG_ENV_NAMES).toContain(name);
    expect(env.REDIS_URL).toBe('redis://:a-token-the-user-supplies@redis:6379');
    expect(service('app').environment?.REDIS_URL).toMatch(/^redis:\/\/:\$\{REDIS_PASSWORD:\?[^}]+\}@redis:6379$/);
    expect(service('app').depends_on).toHaveProperty('redis');
    expect(service('app').build).toBe('.');
    expect(service('app').ports).toEqual(['3000:3000']);
  });

  it('has values the config accepts once compose fills in the defaults', () => {
    const config = loadConfig(resolvedEnv('app'));
    expect(config.port).toBe(3000);
    // Compose's default strategy is the app's, not a second opinion.
    expect(config.lockStrategy).toBe(CONFIG_DEFAULTS.lockStrategy);
  });
});

describe("docker-compose.yml's redis, run as compose runs it (a real redis-server)", () => {
  const bin = findRedisServer();
  const password = 'compose-test-password-5d1c';
  let child: ChildProcess | undefined;
  let port = 0;

  beforeAll(async () => {
    if (!bin) throw new Error('redis-server not found: `npm test` installs it');
    port = await freePort();
    // The service's command with compose's interpolation done, and only what differs
    // outside a container (loopback, a free port, no data volume) added.
    const [, ...args] = (service('redis').command ?? []).map((a) =>
      a.replace(/\$\{REDIS_PASSWORD:\?[^}]*\}/, password),
    );
    child = spawn(bin, [...args, '--port', String(port), '--bind', '127.0.0.1', '--appendonly', 'no', '--save', ''], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    await new Promise<void>((resolve, reject) => {
      let output = '';
      child!.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
        output += chunk;
        if (/Ready to accept connections/.test(output)) resolve();
      });
      child!.once('exit', () => reject(new Error(`redis-server exited before it was ready:\n${output}`)));
    });
    child.stdout!.resume();
    child.stderr!.resume();
  }, 30_000);

  afterAll(async () => {
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child!.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  });

  it('refuses a client without the password, and takes the app with the URL compose gives it', async () => {
    const { Redis } = await import('ioredis');
    const anonymous = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0 });
    try {
      await anonymous.connect().catch(() => undefined);
      await expect(anonymous.set('seckill:{p:x}:stock', 1)).rejects.toThrow(/NOAUTH/);
    } finally {
      anonymous.disconnect();
    }
    // The app's REDIS_URL with the same password, pointed at this server.
    const url = String(service('app').environment?.REDIS_URL)
      .replace(/\$\{REDIS_PASSWORD:\?[^}]*\}/, password)
      .replace('@redis:6379', `@127.0.0.1:${port}`);
    const app = new Redis(url);
    try {
      expect(await app.ping()).toBe('PONG');
    } finally {
      app.disconnect();
    }
  });
});

describe('docker-compose.yml: every app service', () => {
  it.each(APP_SERVICES)('%s gets only variables the config knows, with values it accepts', (name) => {
    const env = resolvedEnv(name);
    // REDIS_CLUSTER_NODES, REDIS_WAIT_REPLICAS and REDIS_WAIT_TIMEOUT_MS are config
    // variables of cluster mode (src/config/app-config.ts).
    for (const variable of Object.keys(env)) expect(CONFIG_ENV_NAMES).toContain(variable);
    expect(() => loadConfig(env)).not.toThrow();
    expect(loadConfig(env).lockStrategy).toBe(CONFIG_DEFAULTS.lockStrategy);
  });

  it("each app's healthcheck asks liveness (/health/live), never Redis: Swarm replaces an unhealthy container", () => {
    // test/probes.e2e-spec.ts runs this very command against the app with Redis stopped.
    for (const name of APP_SERVICES) {
      const command = service(name).healthcheck?.test ?? [];
      expect({ name, command: command.slice(0, 3) }).toEqual({ name, command: ['CMD', 'node', '-e'] });
      expect({ name, url: /fetch\('([^']+)'\)/.exec(command[3])?.[1] }).toEqual({
        name,
        url: `http://127.0.0.1:${resolvedEnv(name).PORT}/health/live`,
      });
    }
  });

  it('publishes a host port of its own for each app a profile adds', () => {
    const published = Object.values(services).flatMap((s) => (s.ports ?? []).map((p) => p.split(':')[0]));
    expect(new Set(published).size).toBe(published.length);
    expect(service('app-cluster').ports).toEqual(['3001:3000']);
    expect(service('proxy').ports).toEqual(['3002:80']);
  });
});

describe('docker-compose.yml: profile cluster', () => {
  const nodes = inProfile('cluster').filter(
    (name) => service(name).image?.startsWith('redis:') && name !== 'redis-cluster-init',
  );
  const address = (name: string): string => {
    const networks = service(name).networks;
    const ip = networks && !Array.isArray(networks) ? networks.cluster?.ipv4_address : undefined;
    if (!ip) throw new Error(`${name} has no fixed address on the cluster network`);
    return ip;
  };

  it('has six Redis 7 nodes on fixed addresses of the cluster network, each with its own data volume', () => {
    expect(nodes).toHaveLength(6);
    const subnet = compose.networks?.cluster?.ipam?.config?.[0]?.subnet;
    expect(subnet).toMatch(/^\d+\.\d+\.\d+\.0\/24$/);
    const ips = nodes.map(address);
    expect(new Set(ips).size).toBe(6);
    for (const name of nodes) {
      const node = service(name);
      expect(node.image).toBe(REDIS_IMAGE);
      expect(node.ports).toBeUndefined(); // only the compose network reaches them
      expect(address(name).startsWith(subnet!.replace(/0\/24$/, ''))).toBe(true);
      const data = (node.volumes ?? []).find((v) => v.endsWith(':/data'));
      expect(data).toBe(`${name}-data:/data`);
      expect(compose.volumes).toHaveProperty(`${name}-data`);
    }
  });

  it('starts every node in cluster mode with AOF, announcing its own fixed address', () => {
    for (const name of nodes) {
      const command = service(name).command ?? [];
      expect(command[0]).toBe('redis-server');
      const conf = redisConf(mountedFile(name, command[1]));
      expect(conf['cluster-enabled']).toBe('yes');
      expect(conf['cluster-config-file']).toBe('nodes.conf');
      expect(conf.appendonly).toBe('yes');
      expect(conf.port).toBe('6379');
      const announced = command[command.indexOf('--cluster-announce-ip') + 1];
      expect(announced).toBe(address(name));
    }
  });

  it('has a one-shot init container that creates the cluster from all six nodes with one replica each', () => {
    const init = service('redis-cluster-init');
    expect(init.image).toBe(REDIS_IMAGE);
    expect(init.restart).toBe('no');
    for (const name of nodes) expect(init.depends_on?.[name]).toEqual({ condition: 'service_healthy' });
    const [shell, script, ...addresses] = init.command ?? [];
    expect(shell).toBe('sh');
    expect(addresses.sort()).toEqual(nodes.map((name) => `${address(name)}:6379`).sort());
    const text = mountedFile('redis-cluster-init', script);
    expect(text).toContain('redis-cli --cluster create "$@" --cluster-replicas 1 --cluster-yes');
    // Idempotent: creates only when the first node serves no slot yet.
    expect(text).toMatch(/cluster_slots_assigned/);
  });

  it('runs app-cluster after the init container, seeded with every node and no REDIS_URL', () => {
    const app = service('app-cluster');
    expect(app.depends_on).toEqual({ 'redis-cluster-init': { condition: 'service_completed_successfully' } });
    expect(app.networks).toEqual(['cluster']);
    const env = resolvedEnv('app-cluster');
    // Both set is a config error: one Redis or one cluster.
    expect(env).not.toHaveProperty('REDIS_URL');
    // Every node, so the client can seed from whichever is up (a replica may be a master after a failover).
    expect(env.REDIS_CLUSTER_NODES.split(',').sort()).toEqual(nodes.map((name) => `${name}:6379`).sort());
    // The app's own defaults: no WAIT unless asked for (docs/scaling.md says what that risks).
    expect(env.REDIS_WAIT_REPLICAS).toBe('0');
    expect(env.REDIS_WAIT_TIMEOUT_MS).toBe('500');
  });
});

describe('docker-compose.yml: profile scale', () => {
  const apps = inProfile('scale').filter((name) => APP_SERVICES.includes(name));

  it('runs two app processes on the default redis, published only through the proxy', () => {
    expect(apps.sort()).toEqual(['app-1', 'app-2']);
    for (const name of apps) {
      // The same app, told that one proxy stands in front of it (who the client is).
      expect(resolvedEnv(name)).toEqual({ ...resolvedEnv('app'), TRUST_PROXY: '1' });
      expect(service(name).ports).toBeUndefined();
      expect(service('proxy').depends_on?.[name]).toEqual({ condition: 'service_healthy' });
    }
  });

  it('routes round robin to both apps, and never resends a purchase', () => {
    const proxy = service('proxy');
    expect(proxy.image).toMatch(/^nginx:/);
    const conf = mountedFile('proxy', '/etc/nginx/conf.d/default.conf').replace(/#.*$/gm, '');
    const upstream = /upstream\s+(\w+)\s*\{([^}]*)\}/.exec(conf);
    expect(upstream).not.toBeNull();
    const [, name, body] = upstream!;
    const servers = [...body.matchAll(/^\s*server\s+([^\s;]+)/gm)].map((m) => m[1]);
    expect(servers.sort()).toEqual(apps.map((app) => `${app}:${resolvedEnv(app).PORT}`).sort());
    // Round robin is nginx's default: no other balancing method in the upstream.
    expect(body).not.toMatch(/\b(least_conn|ip_hash|hash|random)\b/);
    expect(conf).toContain(`proxy_pass http://${name};`);
    // A POST already sent to one app is not passed to the other (nginx's default).
    expect(conf).not.toMatch(/non_idempotent/);
    expect(proxy.ports?.[0]).toMatch(/:80$/);
    expect(conf).toMatch(/listen\s+80;/);
  });

  it('passes the live stream unbuffered and keeps each client on one app', () => {
    const conf = mountedFile('proxy', '/etc/nginx/conf.d/default.conf').replace(/#.*$/gm, '');
    const live = /location\s+\/api\/live\/\s*\{([^}]*)\}/.exec(conf)?.[1];
    expect(live).toBeDefined();
    expect(live).toMatch(/proxy_buffering\s+off;/);
    const upstream = /proxy_pass\s+http:\/\/(\w+);/.exec(live!)?.[1];
    const body = new RegExp(`upstream\\s+${upstream}\\s*\\{([^}]*)\\}`).exec(conf)?.[1];
    expect(body).toMatch(/hash\s+\$remote_addr\s+consistent;/);
    const servers = [...body!.matchAll(/^\s*server\s+([^\s;]+)/gm)].map((m) => m[1]);
    expect(servers.sort()).toEqual(apps.map((app) => `${app}:${resolvedEnv(app).PORT}`).sort());
  });
});

/** A port whose cluster bus port (port + 10000) was free a moment ago too. */
async function freeClusterPort(): Promise<number> {
  for (;;) {
    const port = await freePort();
    if (port + 10_000 > 65_535) continue;
    const busFree = await new Promise<boolean>((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(false));
      server.listen(port + 10_000, '127.0.0.1', () => server.close(() => resolve(true)));
    });
    if (busFree) return port;
  }
}

describe("the cluster profile's node config and init script, on six real redis-servers", () => {
  const bin = findRedisServer();
  const dir = mkdtempSync(join(tmpdir(), 'seckill-compose-cluster-'));
  const children: ChildProcess[] = [];
  const ports: number[] = [];
  // redis-cli sits beside redis-server.
  const env = { ...process.env, PATH: `${dirname(bin ?? '/usr/bin')}:${process.env.PATH ?? ''}` };
  const cli = (port: number, ...args: string[]): string =>
    spawnSync('redis-cli', ['-p', String(port), ...args], { env, encoding: 'utf8' }).stdout;
  const runInit = () =>
    spawnSync('sh', [join(ROOT, 'docker', 'redis-cluster-init.sh'), ...ports.map((p) => `127.0.0.1:${p}`)], {
      env,
      encoding: 'utf8',
      timeout: 90_000,
    });

  beforeAll(async () => {
    if (!bin) throw new Error('redis-server not found: `npm test` installs it');
    for (let i = 0; i < 6; i++) {
      const port = await freeClusterPort();
      const cwd = mkdtempSync(join(dir, `node-${i + 1}-`));
      // The node config exactly as compose mounts it; only what differs outside a
      // container (loopback, a free port and bus port) is given on the command line.
      const child = spawn(
        bin,
        [
          join(ROOT, 'docker', 'redis-cluster-node.conf'),
          ...['--port', String(port), '--bind', '127.0.0.1', '--logfile', ''],
          ...['--cluster-announce-ip', '127.0.0.1', '--cluster-announce-port', String(port)],
          ...['--cluster-announce-bus-port', String(port + 10_000)],
        ],
        { cwd, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      children.push(child);
      ports.push(port);
      await new Promise<void>((resolve, reject) => {
        let output = '';
        child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
          output += chunk;
          if (/Ready to accept connections/.test(output)) resolve();
        });
        child.once('exit', () => reject(new Error(`redis-server exited before it was ready:\n${output}`)));
      });
      child.stdout!.resume();
      child.stderr!.resume();
    }
  }, 30_000);

  afterAll(async () => {
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.kill('SIGTERM');
          }),
      ),
    );
    rmSync(dir, { recursive: true, force: true });
  });

  it('creates a cluster of three masters with one replica each, with AOF on every node', () => {
    const first = runInit();
    expect({ status: first.status, output: first.stdout + first.stderr }).toMatchObject({ status: 0 });
    expect(first.stdout).toContain('redis-cluster-init: cluster_state:ok');
    expect(cli(ports[0], 'cluster', 'info')).toMatch(/cluster_slots_assigned:16384/);
    // Each node's own ROLE (CLUSTER REPLICATE is sent to each replica during the create;
    // another node's CLUSTER NODES learns it by gossip a moment later).
    const roles = ports.map((port) => cli(port, 'role').split('\n')[0]);
    expect(roles.filter((role) => role === 'master')).toHaveLength(3);
    expect(roles.filter((role) => role === 'slave')).toHaveLength(3);
    for (const port of ports) {
      expect(cli(port, 'config', 'get', 'appendonly')).toMatch(/appendonly\s+yes/);
      expect(cli(port, 'config', 'get', 'cluster-enabled')).toMatch(/cluster-enabled\s+yes/);
    }
  }, 90_000);

  it('finds the cluster on a second run and creates nothing', () => {
    const before = cli(ports[0], 'cluster', 'myid');
    const again = runInit();
    expect(again.status).toBe(0);
    expect(again.stdout).toContain('already serves 16384 slots: the cluster exists, nothing to create');
    expect(again.stdout).not.toContain('>>> Performing hash slots allocation');
    expect(cli(ports[0], 'cluster', 'myid')).toBe(before);
  }, 90_000);
});
