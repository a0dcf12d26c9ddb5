'use strict';
/**
 * Private redis-server processes on free loopback ports, for `npm start`, `npm test`
 * and the test helpers. Zero dependencies: it must run before `npm ci` has.
 *
 * It never touches a Redis it did not start, and never binds port 6379 unless a
 * caller asks for that port explicitly.
 */
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');

const DEFAULT_PORT = 6379;

/** @returns {string | null} absolute path of redis-server, or null. */
function findRedisServer() {
  if (process.env.REDIS_SERVER) return process.env.REDIS_SERVER;
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/bin', '/usr/sbin', '/usr/local/bin'];
  for (const dir of dirs) {
    const candidate = path.join(dir, 'redis-server');
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

/**
 * Returns the redis-server path, installing Debian's package first when that is
 * possible without asking anyone (root, apt-get present). Otherwise throws an error
 * whose message says how to get one.
 * @param {(line: string) => void} log
 */
function ensureRedisServer(log) {
  const found = findRedisServer();
  if (found) return found;
  const canApt = process.platform === 'linux' && process.getuid?.() === 0 && fs.existsSync('/usr/bin/apt-get');
  if (!canApt) {
    throw new Error(
      [
        'redis-server is not installed. Install it, or point the app at a Redis you run:',
        '  Debian/Ubuntu:  sudo apt-get install -y redis-server',
        '  macOS:          brew install redis',
        '  Docker:         docker compose up -d redis   (then REDIS_URL=redis://127.0.0.1:6379 npm start)',
        'or set REDIS_SERVER=/path/to/redis-server, or REDIS_URL to use an existing Redis.',
      ].join('\n'),
    );
  }
  log('redis-server is not installed: installing Debian package redis-server with apt-get (running as root)');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const args of [
    ['update', '-q'],
    ['install', '-y', '-q', '--no-install-recommends', 'redis-server'],
  ]) {
    const result = spawnSync('apt-get', args, { stdio: ['ignore', 'inherit', 'inherit'], env });
    if (result.status !== 0) throw new Error(`apt-get ${args.join(' ')} failed (exit ${result.status})`);
  }
  const installed = findRedisServer();
  if (!installed) throw new Error('apt-get installed redis-server but it is not on PATH');
  return installed;
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = /** @type {net.AddressInfo} */ (server.address());
      server.close(() => resolve(port));
    });
  });
}

/**
 * @typedef {object} RedisOptions
 * @property {string} dir        data folder (created); AOF files go here
 * @property {number} [port]     fixed port; default: a free one (retried on a race)
 * @property {boolean} [appendonly]  AOF (default true)
 * @property {'everysec' | 'always'} [appendfsync]  when the AOF reaches the disk (default everysec)
 * @property {string} [bin]      redis-server path (default: found on PATH)
 * @property {boolean} [detached]  own process group, so a terminal's Ctrl-C reaches
 *                                 only the app, which then stops Redis itself
 *
 * @typedef {object} RunningRedis
 * @property {string} url
 * @property {number} port
 * @property {number} pid
 * @property {string} dir
 * @property {() => Promise<void>} stop  SIGTERM (Redis flushes its AOF) and wait for exit
 * @property {() => void} kill           SIGKILL, for fault tests
 * @property {Promise<void>} exited      resolves once the process has exited (for any reason)
 */

/**
 * Starts redis-server and resolves once it accepts connections.
 * @param {RedisOptions} options
 * @returns {Promise<RunningRedis>}
 */
async function startRedis(options) {
  const bin = options.bin ?? findRedisServer();
  if (!bin) throw new Error('redis-server not found: run `npm test` or `npm start` once to install it');
  fs.mkdirSync(options.dir, { recursive: true });
  for (let attempt = 1; ; attempt++) {
    const port = options.port ?? (await freePort());
    if (port === DEFAULT_PORT && options.port !== DEFAULT_PORT) continue;
    try {
      return await launch(bin, port, options);
    } catch (err) {
      // Another process may have taken the free port between our probe and the bind.
      if (options.port !== undefined || attempt >= 5 || !/Address already in use/.test(String(err))) throw err;
    }
  }
}

/** @returns {Promise<RunningRedis>} */
function launch(bin, port, options) {
  const appendonly = options.appendonly ?? true;
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    path.resolve(options.dir),
    '--save',
    '',
    '--appendonly',
    appendonly ? 'yes' : 'no',
    '--appendfsync',
    options.appendfsync ?? 'everysec',
    '--daemonize',
    'no',
    '--logfile',
    '',
  ];
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: options.detached ?? false });
  let output = '';
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    const onData = (chunk) => {
      output += chunk;
      if (!/Ready to accept connections/.test(output)) return;
      child.stdout.off('data', onData);
      child.stdout.resume();
      child.stderr.resume();
      resolve({
        url: `redis://127.0.0.1:${port}`,
        port,
        pid: child.pid,
        dir: options.dir,
        stop: async () => {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
          await exited;
        },
        kill: () => {
          child.kill('SIGKILL');
        },
        exited: exited.then(() => undefined),
      });
    };
    child.stdout.setEncoding('utf8').on('data', onData);
    child.stderr.setEncoding('utf8').on('data', (chunk) => (output += chunk));
    child.once('error', reject);
    exited.then(({ code, signal }) =>
      reject(
        new Error(`redis-server on port ${port} exited (${signal ?? code}) before it was ready:\n${output.trim()}`),
      ),
    );
  });
}

/**
 * How the launchers start a Redlock node: AOF on, fsync before every reply, each node
 * on a data folder of its own that a restart reuses. redis.io "Distributed Locks"
 * (Performance, Crash Recovery and fsync): with no persistence, a node that restarts
 * forgets a lock it granted and "another client can lock it again, violating the
 * safety property of exclusivity of lock"; "if we want to guarantee the lock safety in
 * the face of any kind of instance restart, we need to enable fsync=always in the
 * persistence settings". The page's other way, *delayed restarts* (keep a crashed node
 * down a bit longer than the max TTL), needs whoever restarts a node to wait; this
 * needs nothing of them, at the cost of one fsync per lock write on these nodes.
 * @type {Readonly<Pick<RedisOptions, 'appendonly' | 'appendfsync'>>}
 */
const REDLOCK_NODE = Object.freeze({ appendonly: true, appendfsync: 'always' });

/**
 * For the launchers: find or install redis-server and hand its path to the child
 * processes (REDIS_SERVER), or say why not and exit 1.
 * @param {(line: string) => void} log
 */
function provideRedisServerOrExit(log) {
  try {
    process.env.REDIS_SERVER = ensureRedisServer(log);
  } catch (err) {
    log(err.message);
    process.exit(1);
  }
}

module.exports = {
  findRedisServer,
  ensureRedisServer,
  provideRedisServerOrExit,
  freePort,
  startRedis,
  REDLOCK_NODE,
};
