'use strict';
/**
 * Private redis-server processes on free loopback ports, for `npm start`, `npm test`
 * and the test helpers. Zero dependencies: it must run before `npm ci` has.
 *
 * It never touches a Redis it did not start, and never binds port 6379 unless a
 * caller asks for that port explicitly.
 */
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { findOrAptInstall } = require('./apt');
const { findExecutable, freePort, onFreePort, spawnUntilReady } = require('./private-server');

const DEFAULT_PORT = 6379;

/** @returns {string | null} absolute path of redis-server, or null. */
function findRedisServer() {
  return process.env.REDIS_SERVER || findExecutable('redis-server');
}

/**
 * Returns the redis-server path, installing Debian's package first when that is
 * possible without asking anyone (root, apt-get present). Otherwise throws an error
 * whose message says how to get one.
 * @param {(line: string) => void} log
 */
function ensureRedisServer(log) {
  return findOrAptInstall({
    find: findRedisServer,
    pkg: 'redis-server',
    what: 'redis-server',
    howTo: [
      'redis-server is not installed. Install it, or point the app at a Redis you run:',
      '  Debian/Ubuntu:  sudo apt-get install -y redis-server',
      '  macOS:          brew install redis',
      '  Docker:         docker compose up -d redis   (then REDIS_URL=redis://127.0.0.1:6379 npm start)',
      'or set REDIS_SERVER=/path/to/redis-server, or REDIS_URL to use an existing Redis.',
    ].join('\n'),
    notFound: 'apt-get installed redis-server but it is not on PATH',
    log,
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
 * @property {true | ClusterNodeOptions} [cluster]  run as a Redis Cluster node (nodes.conf in `dir`)
 * @property {string[]} [extraArgs]  more redis-server arguments, after ours
 *
 * @typedef {object} ClusterNodeOptions
 * @property {number} [nodeTimeoutMs]  how long a node may be unreachable before it is
 *   taken as failing and its replica promoted (default CLUSTER_NODE_TIMEOUT_MS)
 * @property {number} [busPort]  the cluster bus port (default: Redis' port + 10000,
 *   which is past 65535 for most free ports: startCluster always names one)
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
  return onFreePort(options.port, DEFAULT_PORT, (port) => launch(bin, port, options));
}

/** @returns {Promise<RunningRedis>} */
async function launch(bin, port, options) {
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
    ...(options.cluster ? clusterArgs(options.cluster) : []),
    ...(options.extraArgs ?? []),
  ];
  const { child, exited } = await spawnUntilReady({
    name: 'redis-server',
    port,
    bin,
    args,
    ready: /Ready to accept connections/,
    spawn: { detached: options.detached ?? false },
  });
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    pid: child.pid,
    dir: options.dir,
    stop: async () => {
      // Redis may refuse one SIGTERM and go on running: a replica that has just
      // synced with AOF on says "Writing initial AOF, can't exit" until its rewrite
      // is done. So the request is repeated until the process is gone.
      const again = setInterval(() => child.kill('SIGTERM'), 500);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
      clearInterval(again);
    },
    kill: () => {
      child.kill('SIGKILL');
    },
    exited,
  };
}

/**
 * A failover in a test should take seconds, not Redis' default 15 s: a replica is
 * promoted about one node timeout after its master stops answering.
 */
const CLUSTER_NODE_TIMEOUT_MS = 2000;

/** @param {true | ClusterNodeOptions} cluster */
function clusterArgs(cluster) {
  const { nodeTimeoutMs, busPort } = cluster === true ? {} : cluster;
  return [
    '--cluster-enabled',
    'yes',
    '--cluster-config-file',
    'nodes.conf',
    '--cluster-node-timeout',
    String(nodeTimeoutMs ?? CLUSTER_NODE_TIMEOUT_MS),
    ...(busPort ? ['--cluster-port', String(busPort)] : []),
  ];
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

/** Every slot of a Redis Cluster: the cluster serves only when each one has a live master. */
const CLUSTER_SLOTS = 16384;

/** Where startCluster keeps a cluster's ports: nodes.conf names peers by ip:port, so a restart must reuse them. */
const LAYOUT_FILE = 'ports.json';

/**
 * redis-cli beside `redisServer` (Debian puts both in /usr/bin), else on PATH.
 * @param {string} [redisServer]
 * @returns {string} its path; throws with how to get one if there is none
 */
function findRedisCli(redisServer) {
  const found = findExecutable('redis-cli', redisServer ? [path.dirname(redisServer)] : []);
  if (found) return found;
  throw new Error(
    'redis-cli is not installed (it joins the nodes into a cluster): Debian/Ubuntu: sudo apt-get install -y redis-tools; macOS: brew install redis',
  );
}

/**
 * One command to the Redis on 127.0.0.1:`port`, on a connection of its own that is
 * closed before this resolves: enough RESP for replies that are a status, an error,
 * an integer or a bulk string (PING, INFO, CLUSTER INFO, CLUSTER NODES). Zero
 * dependencies, like this whole file.
 * @param {number} port
 * @param {string[]} args
 * @param {number} [timeoutMs]
 * @returns {Promise<string | number | null>}
 */
function redisCommand(port, args, timeoutMs = 2000) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let buffer = Buffer.alloc(0);
    const finish = (err, value) => {
      clearTimeout(timer);
      socket.destroy();
      if (err) reject(err);
      else resolve(value);
    };
    const timer = setTimeout(
      () => finish(new Error(`127.0.0.1:${port} did not answer ${args[0]} within ${timeoutMs} ms`)),
      timeoutMs,
    );
    socket.on('error', (err) => finish(err));
    socket.on('data', (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      const eol = buffer.indexOf('\r\n');
      if (eol < 0) return;
      const head = buffer.toString('utf8', 1, eol);
      switch (String.fromCharCode(buffer[0])) {
        case '+':
          return finish(null, head);
        case '-':
          return finish(new Error(`127.0.0.1:${port} ${args.join(' ')}: ${head}`));
        case ':':
          return finish(null, Number(head));
        case '$': {
          const length = Number(head);
          if (length < 0) return finish(null, null);
          if (buffer.length < eol + 2 + length + 2) return; // more to come
          return finish(null, buffer.toString('utf8', eol + 2, eol + 2 + length));
        }
        default:
          return finish(new Error(`127.0.0.1:${port} ${args[0]}: a reply this client does not read`));
      }
    });
    socket.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`);
  });
}

/** `field:value` lines (INFO, CLUSTER INFO) as an object. */
function infoFields(text) {
  /** @type {Record<string, string>} */
  const fields = {};
  for (const line of String(text).split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) fields[line.slice(0, colon)] = line.slice(colon + 1);
  }
  return fields;
}

/**
 * What stands between the node on `port` and a healthy cluster, or null when nothing
 * does: it says cluster_state:ok with every slot assigned and served by a master it
 * does not take for failing, it knows `knownNodes` nodes (when given), and a replica
 * has its link to its master up.
 * @param {number} port
 * @param {{ knownNodes?: number }} [expect]
 * @returns {Promise<string | null>}
 */
async function clusterNodeProblem(port, expect = {}) {
  try {
    const info = infoFields(await redisCommand(port, ['CLUSTER', 'INFO']));
    if (info.cluster_state !== 'ok') return `cluster_state:${info.cluster_state}`;
    if (Number(info.cluster_slots_ok) !== CLUSTER_SLOTS)
      return `cluster_slots_ok:${info.cluster_slots_ok} of ${CLUSTER_SLOTS}`;
    if (expect.knownNodes !== undefined && Number(info.cluster_known_nodes) !== expect.knownNodes)
      return `cluster_known_nodes:${info.cluster_known_nodes} of ${expect.knownNodes}`;
    const replication = infoFields(await redisCommand(port, ['INFO', 'replication']));
    if (replication.role === 'slave' && replication.master_link_status !== 'up')
      return `a replica with master_link_status:${replication.master_link_status}`;
    return null;
  } catch (err) {
    return err.message;
  }
}

/**
 * Resolves once every node on `ports` reports a healthy cluster (clusterNodeProblem);
 * polls, and throws what each unhealthy node last said after `timeoutMs`.
 * @param {number[]} ports
 * @param {{ timeoutMs?: number, knownNodes?: number }} [options]
 */
async function waitForClusterHealthy(ports, { timeoutMs = 30_000, knownNodes } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const problems = await Promise.all(ports.map((port) => clusterNodeProblem(port, { knownNodes })));
    if (problems.every((p) => p === null)) return;
    if (Date.now() >= deadline) {
      const said = ports.flatMap((port, i) => (problems[i] ? [`  127.0.0.1:${port}: ${problems[i]}`] : []));
      throw new Error(`the Redis Cluster was not healthy within ${timeoutMs} ms:\n${said.join('\n')}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * @typedef {object} ClusterLayout  what `<dir>/ports.json` holds
 * @property {number} masters
 * @property {number} replicas  per master
 * @property {{ port: number, busPort: number }[]} nodes  node i lives in `<dir>/<i>/`
 *
 * @typedef {object} ClusterOptions
 * @property {string} dir  one folder per node below it (`<dir>/0/`, ...) and ports.json
 * @property {number} [masters]  3 or more (default 3)
 * @property {number} [replicas]  replicas per master (default 0)
 * @property {boolean} [appendonly]  AOF on every node (default true)
 * @property {'everysec' | 'always'} [appendfsync]
 * @property {boolean} [detached]  as in RedisOptions
 * @property {number} [nodeTimeoutMs]  cluster-node-timeout (default CLUSTER_NODE_TIMEOUT_MS)
 * @property {number} [timeoutMs]  how long the cluster may take to become healthy (default 30 s)
 * @property {string} [bin]  redis-server path (default: found on PATH); redis-cli is looked for beside it
 * @property {(line: string) => void} [log]
 *
 * @typedef {RunningRedis & { index: number, busPort: number, role: 'master' | 'replica' }} RunningClusterNode
 *   role: what the node was once the cluster was healthy; a failover changes it later
 *
 * @typedef {object} RunningCluster
 * @property {RunningClusterNode[]} nodes
 * @property {string} clusterNodes  the masters' `127.0.0.1:port`s, comma-separated (REDIS_CLUSTER_NODES)
 * @property {string} dir
 * @property {number} masters
 * @property {number} replicas
 * @property {boolean} created  true if this start made the cluster, false if it restarted a saved one
 * @property {() => Promise<void>} stop  SIGTERM every node and wait for all to exit
 */

/** Thrown when `dir` holds a cluster of another shape than asked; `.saved` is its layout. */
class ClusterLayoutError extends Error {
  /** @param {string} message @param {ClusterLayout} saved */
  constructor(message, saved) {
    super(message);
    this.name = 'ClusterLayoutError';
    this.saved = saved;
  }
}

/**
 * Starts a Redis Cluster of `masters * (1 + replicas)` private redis-server processes
 * on free loopback ports, each in `<dir>/<i>/`, joins them with `redis-cli --cluster
 * create` and resolves once every node reports cluster_state:ok with all 16384 slots
 * served and each replica linked to its master.
 *
 * A folder it made before is started again as it was: nodes.conf in each node folder
 * remembers the peers by ip:port, so the ports saved in `<dir>/ports.json` are reused
 * and no create runs. ports.json is written only once a create has succeeded: node
 * folders without it are what a create that never finished left, and start afresh.
 * @param {ClusterOptions} options
 * @returns {Promise<RunningCluster>}
 */
async function startCluster(options) {
  const { dir, masters = 3, replicas = 0, log = () => {} } = options;
  if (!Number.isInteger(masters) || masters < 3)
    throw new Error(`a Redis Cluster needs at least 3 masters (asked for ${masters})`);
  if (!Number.isInteger(replicas) || replicas < 0)
    throw new Error(`replicas per master must be an integer >= 0 (asked for ${replicas})`);
  const bin = options.bin ?? findRedisServer();
  if (!bin) throw new Error('redis-server not found: run `npm test` or `npm start` once to install it');
  const count = masters * (1 + replicas);
  const layoutFile = path.join(dir, LAYOUT_FILE);
  /** @type {ClusterLayout | null} */
  const saved = fs.existsSync(layoutFile) ? JSON.parse(fs.readFileSync(layoutFile, 'utf8')) : null;
  if (saved && (saved.masters !== masters || saved.replicas !== replicas)) {
    throw new ClusterLayoutError(
      `${dir} holds a cluster of ${saved.masters} masters with ${saved.replicas} replicas each, not ${masters} with ${replicas}: ` +
        `start it with that layout, or delete ${dir} (and its data) for a new one`,
      saved,
    );
  }
  const redis = {
    appendonly: options.appendonly ?? true,
    ...(options.appendfsync ? { appendfsync: options.appendfsync } : {}),
    ...(options.detached !== undefined ? { detached: options.detached } : {}),
    bin,
  };
  const nodeDir = (i) => path.join(dir, String(i));

  /** @param {number} i @param {{ port: number, busPort: number }} [at] */
  async function startNode(i, at) {
    const start = async (port) => {
      const busPort = at?.busPort ?? (await freePort());
      // A bus port that clashes is retried as a port another process took.
      if (!at && (busPort === port || busPort === DEFAULT_PORT)) throw new Error('bus port already in use');
      const cluster = { nodeTimeoutMs: options.nodeTimeoutMs, busPort };
      return { ...(await startRedis({ ...redis, dir: nodeDir(i), port, cluster })), index: i, busPort };
    };
    try {
      return await onFreePort(at?.port, DEFAULT_PORT, start);
    } catch (err) {
      if (!at || !/Address already in use/.test(String(err))) throw err;
      throw new Error(
        `cluster node ${i} must listen on ports ${at.port} and ${at.busPort} (its peers know it there, ${layoutFile}), ` +
          `but one is taken by another process: stop that process, or delete ${dir} (and its data) for a new cluster`,
        { cause: err },
      );
    }
  }

  if (!saved) {
    for (let i = 0; i < count; i++) fs.rmSync(nodeDir(i), { recursive: true, force: true });
  }
  // All at once: a master still starting while the others already run would be taken
  // for failed after one node timeout, and its replica promoted in its place.
  const starts = await Promise.allSettled(Array.from({ length: count }, (_, i) => startNode(i, saved?.nodes[i])));
  const nodes = starts.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const stop = () => Promise.all(nodes.map((n) => n.stop())).then(() => undefined);
  try {
    const failed = starts.find((s) => s.status === 'rejected');
    if (failed) throw failed.reason;
    const ports = nodes.map((n) => n.port);
    if (!saved) {
      await createCluster(findRedisCli(bin), ports, replicas, options.detached ?? false);
      await waitForClusterHealthy(ports, { timeoutMs: options.timeoutMs, knownNodes: count });
      /** @type {ClusterLayout} */
      const layout = { masters, replicas, nodes: nodes.map((n) => ({ port: n.port, busPort: n.busPort })) };
      fs.writeFileSync(layoutFile, `${JSON.stringify(layout, null, 2)}\n`);
      log(`created a Redis Cluster of ${masters} masters with ${replicas} replicas each in ${dir}`);
    } else {
      await waitForClusterHealthy(ports, { timeoutMs: options.timeoutMs, knownNodes: count });
    }
    /** @type {RunningClusterNode[]} */
    const running = [];
    for (const node of nodes) {
      const { role } = infoFields(await redisCommand(node.port, ['INFO', 'replication']));
      running.push({ ...node, role: role === 'master' ? 'master' : 'replica' });
    }
    return {
      nodes: running,
      clusterNodes: running
        .filter((n) => n.role === 'master')
        .map((n) => `127.0.0.1:${n.port}`)
        .join(','),
      dir,
      masters,
      replicas,
      created: !saved,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * `redis-cli --cluster create`: assigns the slots evenly over the masters and the
 * replicas to them. Detached like the nodes, so a Ctrl-C meant for the launcher does
 * not cut the create short.
 */
function createCluster(cli, ports, replicas, detached) {
  const args = ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`)];
  args.push('--cluster-replicas', String(replicas), '--cluster-yes');
  return new Promise((resolve, reject) => {
    const child = spawn(cli, args, { stdio: ['ignore', 'pipe', 'pipe'], detached });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (output += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (output += d));
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      if (code === 0 && !/\[ERR\]/.test(output)) resolve(undefined);
      else reject(new Error(`redis-cli --cluster create failed (${signal ?? `exit ${code}`}):\n${output.trim()}`));
    });
  });
}

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
  startCluster,
  ClusterLayoutError,
  findRedisCli,
  redisCommand,
  waitForClusterHealthy,
  clusterNodeProblem,
  CLUSTER_NODE_TIMEOUT_MS,
  CLUSTER_SLOTS,
  REDLOCK_NODE,
};
