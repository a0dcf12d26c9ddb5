'use strict';
/**
 * `npm start`: install and build if needed, start a private Redis unless REDIS_URL
 * names one, then run the app; stop that Redis when the app exits.
 * `npm run start:dev` (`--watch`): the same, with the app run by `nest start --watch`,
 * which rebuilds and restarts it when a source file changes.
 * `npm start -- --cluster 3 [--replicas 1]` (or REDIS_CLUSTER=3, REDIS_CLUSTER_REPLICAS=1):
 * a private Redis Cluster of 3 masters (and a replica each) instead, unless
 * REDIS_CLUSTER_NODES names one; the app gets its masters in REDIS_CLUSTER_NODES.
 *
 * Settings come from the environment, and from `.env` in the working directory if
 * there is one (see `.env.example`); a variable set in the environment wins over `.env`.
 * The app runs in the same directory and reads the same file the same way
 * (src/config/env-file.ts), so it is configured as when run by hand.
 */
const { spawn } = require('node:child_process');
const { randomBytes } = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { parseArgs, parseEnv } = require('node:util');
const { isAlive } = require('./setup');
const { ROOT, log, launch } = require('./launch');
const { startRedis, startCluster, ClusterLayoutError, REDLOCK_NODE } = require('./redis-server');
const { dataDirFor, startPostgres } = require('./postgres-server');

const DATA = path.join(ROOT, '.data');
const DATA_DIR = path.join(DATA, 'redis');
const CLUSTER_DIR = path.join(DATA, 'cluster');
const PID_FILE = path.join(DATA, 'launcher.pid');
const NEST = path.join(ROOT, 'node_modules', '@nestjs', 'cli', 'bin', 'nest.js');

/** Says what is wrong with how we were started, and exits 1. */
function usage(problem) {
  log(problem);
  log('usage: npm start -- [--watch] [--cluster <masters, 3 or more> [--replicas <per master>]]');
  process.exit(1);
}

/**
 * The command line (`--watch`, `--cluster N`, `--replicas R`), the last two also
 * from the environment (REDIS_CLUSTER, REDIS_CLUSTER_REPLICAS; the flags win).
 * Anything else is refused rather than ignored.
 * @returns {{ watch: boolean, cluster: { masters: number, replicas: number } | null }}
 */
function launchOptions(env) {
  let values;
  try {
    ({ values } = parseArgs({
      args: process.argv.slice(2),
      options: { watch: { type: 'boolean' }, cluster: { type: 'string' }, replicas: { type: 'string' } },
    }));
  } catch (err) {
    usage(err.message);
  }
  const cluster = values.cluster !== undefined ? ['--cluster', values.cluster] : ['REDIS_CLUSTER', env.REDIS_CLUSTER];
  const replicas =
    values.replicas !== undefined
      ? ['--replicas', values.replicas]
      : ['REDIS_CLUSTER_REPLICAS', env.REDIS_CLUSTER_REPLICAS];
  const watch = values.watch ?? false;
  if (!cluster[1]) {
    if (replicas[1])
      usage(
        `${replicas[0]} ${replicas[1]} needs --cluster <masters> (or REDIS_CLUSTER): replicas belong to a cluster's masters`,
      );
    return { watch, cluster: null };
  }
  const count = (name, value) => (/^\d+$/.test(value) ? Number(value) : usage(`${name} ${value}: not a whole number`));
  const masters = count(...cluster);
  // Redis refuses to create a cluster of fewer: a failover needs a majority of masters.
  if (masters < 3) usage(`${cluster[0]} ${masters}: a Redis Cluster needs at least 3 masters`);
  return { watch, cluster: { masters, replicas: replicas[1] ? count(...replicas) : 0 } };
}

/** How long the app's process group may take to exit after its leader did, before SIGKILL. */
const GROUP_EXIT_MS = 15_000;

/** Resolves once no process of group `pgid` is left; SIGKILLs the group after `waitMs`. */
async function groupGone(pgid, waitMs) {
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      process.kill(-pgid, 0);
    } catch {
      return; // ESRCH: nobody left
    }
    if (Date.now() >= deadline) {
      log(`the app's processes did not exit within ${waitMs} ms of a stop: SIGKILL`);
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        return;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * One launcher at a time starts private servers in .data/ (Redis in redis/ or cluster/,
 * the Redlock nodes in redlock-*, PostgreSQL in postgres/): two servers writing one AOF
 * or one PostgreSQL data folder would corrupt it. `instead` says, for each private
 * server this launch would start, what to set so that it starts none.
 */
function claimDataDir(instead) {
  fs.mkdirSync(DATA, { recursive: true });
  const owner = fs.existsSync(PID_FILE) ? Number(fs.readFileSync(PID_FILE, 'utf8')) : 0;
  if (owner && owner !== process.pid && isAlive(owner)) {
    log(
      `another \`npm start\` (pid ${owner}) is running private servers in ${path.relative(ROOT, DATA)}/; stop it first, or set ${instead.join(', and ')}, so that this one starts none there`,
    );
    process.exit(1);
  }
  fs.writeFileSync(PID_FILE, String(process.pid));
}

/**
 * The environment over `.env` in the working directory when there is one (util.parseEnv,
 * the parser behind the app's process.loadEnvFile), and where each variable came from.
 * @returns {{ env: Record<string, string | undefined>, from: (name: string) => string }}
 */
function environment() {
  const file = path.resolve('.env');
  const fromFile = fs.existsSync(file) ? parseEnv(fs.readFileSync(file, 'utf8')) : {};
  const names = Object.keys(fromFile);
  if (fs.existsSync(file)) {
    // Names only: the values may be secrets.
    const overridden = names.filter((name) => name in process.env);
    const taken = names.filter((name) => !(name in process.env));
    log(
      `reading ${process.cwd() === ROOT ? '.env' : file}: ${taken.join(', ') || 'nothing'}` +
        (overridden.length > 0 ? ` (${overridden.join(', ')} also set in the environment, which wins)` : ''),
    );
  }
  return {
    env: { ...fromFile, ...process.env },
    from: (name) => (name in process.env ? 'the environment' : '.env'),
  };
}

/**
 * The private Redis Cluster in .data/cluster/, or exit 1 saying why not: a folder
 * holding a cluster of another shape, or a port its nodes must reuse that is taken.
 */
async function startEmbeddedCluster({ masters, replicas }) {
  const dir = `${path.relative(ROOT, CLUSTER_DIR)}/`;
  try {
    return await startCluster({ dir: CLUSTER_DIR, masters, replicas, appendonly: true, detached: true });
  } catch (err) {
    if (!(err instanceof ClusterLayoutError)) {
      log(err.message);
      process.exit(1);
    }
    const saved = `--cluster ${err.saved.masters}${err.saved.replicas ? ` --replicas ${err.saved.replicas}` : ''}`;
    log(
      `${dir} holds a cluster of ${err.saved.masters} masters with ${err.saved.replicas} replicas each, not ${masters} with ${replicas}: ` +
        `start it as it was made (npm start -- ${saved}), or delete ${dir} (and the data in it) to make a new one`,
    );
    process.exit(1);
  }
}

/**
 * What this launch starts, decided from the command line and the environment before
 * anything is installed, so that a refused one installs and builds nothing.
 */
function plan() {
  const { env, from } = environment();
  const options = launchOptions(env);
  if (options.cluster && !env.REDIS_CLUSTER_NODES && env.REDIS_URL) {
    usage('--cluster (or REDIS_CLUSTER) starts a cluster for the app, but REDIS_URL names a Redis: unset one of them');
  }
  // What this launch starts in .data/, decided before anything is: each needs the claim.
  const startsCluster = Boolean(options.cluster && !env.REDIS_CLUSTER_NODES);
  const startsRedis = !startsCluster && !env.REDIS_CLUSTER_NODES && !env.REDIS_URL;
  // Redlock needs independent nodes for the lock alone; they hold no sale data, but a
  // node that restarts must remember the locks it granted (REDLOCK_NODE says why).
  const startsLockNodes = env.LOCK_STRATEGY === 'redlock' && !env.REDLOCK_URLS;
  // Orders are settled into PostgreSQL: a private one in .data/postgres/ (kept across
  // restarts) unless DATABASE_URL names one, or SETTLE=off says none.
  const settleOff = String(env.SETTLE ?? '').toLowerCase() === 'off';
  const startsPostgres = !env.DATABASE_URL && !settleOff;
  return { env, from, options, startsCluster, startsRedis, startsLockNodes, settleOff, startsPostgres };
}

async function main({ env, from, options, startsCluster, startsRedis, startsLockNodes, settleOff, startsPostgres }) {
  // Ctrl-C, a SIGTERM sent to us and a closed terminal (SIGHUP) stop the app; one that
  // comes while Redis is still starting (a cluster takes seconds) is acted on once it
  // has: Redis runs in process groups of its own, and nothing else would stop it.
  let stopping = false;
  let app = null;
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(signal, () => {
      stopping = true;
      if (!app) return;
      try {
        process.kill(-app.pid, 'SIGTERM');
      } catch {
        // the group is already gone
      }
    });
  }
  const instead = [
    ...(startsCluster ? ['REDIS_CLUSTER_NODES (a cluster of your own)'] : []),
    ...(startsRedis ? ['REDIS_URL (or REDIS_CLUSTER_NODES)'] : []),
    ...(startsLockNodes ? ['REDLOCK_URLS'] : []),
    ...(startsPostgres ? ['DATABASE_URL (or SETTLE=off: no settlement)'] : []),
  ];
  if (instead.length > 0) claimDataDir(instead);

  let redis = null;
  let cluster = null;
  if (startsCluster) {
    cluster = await startEmbeddedCluster(options.cluster);
    env.REDIS_CLUSTER_NODES = cluster.clusterNodes;
    const { masters, replicas } = options.cluster;
    const pids = cluster.nodes.map((n) => n.pid).join(',');
    log(
      `embedded Redis Cluster at ${cluster.clusterNodes} (${masters} masters, ${replicas} replica${replicas === 1 ? '' : 's'} each, pids ${pids}; ` +
        `${cluster.created ? 'created' : 'restarted'} with AOF everysec in ${path.relative(ROOT, CLUSTER_DIR)}/)`,
    );
  } else if (startsRedis) {
    redis = await startRedis({ dir: DATA_DIR, appendonly: true, detached: true });
    env.REDIS_URL = redis.url;
    log(`embedded Redis at ${redis.url} (pid ${redis.pid}, AOF everysec in ${path.relative(ROOT, DATA_DIR)}/)`);
  } else if (env.REDIS_CLUSTER_NODES) {
    log(`using REDIS_CLUSTER_NODES from ${from('REDIS_CLUSTER_NODES')}`);
  } else {
    log(`using REDIS_URL from ${from('REDIS_URL')}`);
  }
  const lockNodes = [];
  if (startsLockNodes) {
    for (let i = 1; i <= 3; i++) {
      lockNodes.push(await startRedis({ dir: path.join(DATA, `redlock-${i}`), ...REDLOCK_NODE, detached: true }));
    }
    env.REDLOCK_URLS = lockNodes.map((n) => n.url).join(',');
    log(`embedded Redlock nodes at ${env.REDLOCK_URLS} (AOF, appendfsync always, in .data/redlock-1..3/)`);
  } else if (env.LOCK_STRATEGY === 'redlock') {
    log(`using REDLOCK_URLS from ${from('REDLOCK_URLS')}`);
  }
  let postgres = null;
  if (env.DATABASE_URL) {
    log(`using DATABASE_URL from ${from('DATABASE_URL')}`);
  } else if (settleOff) {
    log(`SETTLE=off (from ${from('SETTLE')}): no PostgreSQL; orders stay in Redis only`);
  } else {
    const dir = dataDirFor(path.join(DATA, 'postgres'), log);
    postgres = await startPostgres({ dir, durable: true, detached: true });
    env.DATABASE_URL = postgres.url;
    log(`embedded PostgreSQL at ${postgres.url} (pid ${postgres.pid}, data in ${path.relative(ROOT, dir) || dir}/)`);
  }
  if (!env.ADMIN_TOKEN) {
    env.ADMIN_TOKEN = randomBytes(24).toString('base64url');
    log(`admin token (generated; set ADMIN_TOKEN to choose one): ${env.ADMIN_TOKEN}`);
  } else {
    log(`admin token: the ADMIN_TOKEN set in ${from('ADMIN_TOKEN')}`);
  }

  // --no-shell: nest runs the app itself, not through `sh -c`, so the app gets our
  // signals and nest waits for it to exit. nest reads its own files (nest-cli.json,
  // tsconfig) from the project's root, and runs the app there; the app alone runs
  // where we do, so that the `.env` it reads is the one read above.
  const args = options.watch ? [NEST, 'start', '--watch', '--no-shell'] : [path.join(ROOT, 'dist', 'src', 'main.js')];
  const cwd = options.watch ? ROOT : process.cwd();
  // The app runs in its own process group, so that a stop reaches all of it: under
  // --watch that is `nest start` and the app it spawned, which a signal sent to
  // `nest` alone would orphan.
  let code = 0;
  if (!stopping) {
    app = spawn(process.execPath, args, { cwd, env, stdio: 'inherit', detached: true });
    void announceDashboard(env, app);
    code = await new Promise((resolve) => app.once('exit', (c, s) => resolve(c ?? (s ? 128 + 15 : 1))));
    // Everything in the app's group must be gone before its Redis goes: an app still
    // draining would otherwise lose its Redis mid-purchase.
    await groupGone(app.pid, GROUP_EXIT_MS);
  }
  await Promise.all(lockNodes.map((n) => n.stop()));
  if (postgres) {
    await postgres.stop();
    log('embedded PostgreSQL stopped');
  }
  if (redis) {
    await redis.stop();
    log('embedded Redis stopped');
  }
  if (cluster) {
    await cluster.stop();
    log('embedded Redis Cluster stopped');
  }
  if (instead.length > 0) fs.rmSync(PID_FILE, { force: true });
  process.exit(stopping && code === 0 ? 0 : code);
}

/**
 * Says where the dashboard is once the app answers HTTP (any status: /health's 503
 * still means the app is up), or says nothing if the app exits first.
 */
async function announceDashboard(env, child) {
  const port = env.PORT || '3000';
  const host = !env.HOST || env.HOST === '0.0.0.0' || env.HOST === '::' ? 'localhost' : env.HOST;
  const base = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  while (child.exitCode === null && child.signalCode === null) {
    const up = await fetch(`${base}/health`, { signal: AbortSignal.timeout(1_000) }).then(
      () => true,
      () => false,
    );
    if (up) return log(`dashboard: ${base}/`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

// An older Node relaunches this file on Node 24 and only passes its signals on: the
// relaunched launcher is the one that owns the app's group and Redis, as below.
let planned;
launch(
  () => {
    planned = plan();
    const { startsCluster, startsRedis, startsLockNodes, startsPostgres } = planned;
    return { redis: startsCluster || startsRedis || startsLockNodes, postgres: startsPostgres };
  },
  () =>
    main(planned).catch((err) => {
      log(err.stack ?? String(err));
      process.exit(1);
    }),
);
