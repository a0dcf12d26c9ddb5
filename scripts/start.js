'use strict';
/**
 * `npm start`: install and build if needed, start a private Redis unless REDIS_URL
 * names one, then run the app; stop that Redis when the app exits.
 * `npm run start:dev` (`--watch`): the same, with the app run by `nest start --watch`,
 * which rebuilds and restarts it when a source file changes.
 *
 * Settings come from the environment, and from `.env` if there is one (see
 * `.env.example`); a variable set in the environment wins over `.env`.
 */
const { spawn } = require('node:child_process');
const { randomBytes } = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { parseEnv } = require('node:util');
const { ROOT, log, isAlive, relaunchOnSupportedNode, ensureDependencies, ensureBuilt } = require('./setup');
const { provideRedisServerOrExit, startRedis, REDLOCK_NODE } = require('./redis-server');

const DATA_DIR = path.join(ROOT, '.data', 'redis');
const PID_FILE = path.join(DATA_DIR, 'launcher.pid');
const NEST = path.join(ROOT, 'node_modules', '@nestjs', 'cli', 'bin', 'nest.js');
const WATCH = process.argv.includes('--watch');

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
 * One launcher per data folder (.data/redis and the Redlock nodes' .data/redlock-*):
 * two servers writing one AOF would corrupt it. Claimed at most once per launch.
 */
let claimed = false;
function claimDataDir() {
  if (claimed) return;
  claimed = true;
  fs.mkdirSync(DATA_DIR, { recursive: true });
  const owner = fs.existsSync(PID_FILE) ? Number(fs.readFileSync(PID_FILE, 'utf8')) : 0;
  if (owner && owner !== process.pid && isAlive(owner)) {
    log(
      `another \`npm start\` (pid ${owner}) is using ${path.relative(ROOT, path.dirname(DATA_DIR))}/; stop it first, or set REDIS_URL (and REDLOCK_URLS for redlock)`,
    );
    process.exit(1);
  }
  fs.writeFileSync(PID_FILE, String(process.pid));
}

/** The environment, over `.env` when it exists. */
function environment() {
  const file = path.join(ROOT, '.env');
  if (!fs.existsSync(file)) return { ...process.env };
  log('reading .env (variables set in the environment win)');
  return { ...parseEnv(fs.readFileSync(file, 'utf8')), ...process.env };
}

async function main() {
  ensureDependencies();
  ensureBuilt();
  const env = environment();
  let redis = null;
  if (!env.REDIS_URL) {
    provideRedisServerOrExit(log);
    claimDataDir();
    redis = await startRedis({ dir: DATA_DIR, appendonly: true, detached: true });
    env.REDIS_URL = redis.url;
    log(`embedded Redis at ${redis.url} (pid ${redis.pid}, AOF everysec in ${path.relative(ROOT, DATA_DIR)}/)`);
  } else {
    log('using REDIS_URL from the environment');
  }
  const lockNodes = [];
  if (env.LOCK_STRATEGY === 'redlock' && !env.REDLOCK_URLS) {
    // Redlock needs independent nodes for the lock alone; they hold no sale data, but a
    // node that restarts must remember the locks it granted (REDLOCK_NODE says why).
    provideRedisServerOrExit(log);
    claimDataDir();
    for (let i = 1; i <= 3; i++) {
      lockNodes.push(
        await startRedis({ dir: path.join(ROOT, '.data', `redlock-${i}`), ...REDLOCK_NODE, detached: true }),
      );
    }
    env.REDLOCK_URLS = lockNodes.map((n) => n.url).join(',');
    log(`embedded Redlock nodes at ${env.REDLOCK_URLS} (AOF, appendfsync always, in .data/redlock-1..3/)`);
  }
  if (!env.ADMIN_TOKEN) {
    env.ADMIN_TOKEN = randomBytes(24).toString('base64url');
    log(`admin token (generated; set ADMIN_TOKEN to choose one): ${env.ADMIN_TOKEN}`);
  } else {
    log('admin token: the ADMIN_TOKEN you set');
  }

  // --no-shell: nest runs the app itself, not through `sh -c`, so the app gets our
  // signals and nest waits for it to exit.
  const args = WATCH ? [NEST, 'start', '--watch', '--no-shell'] : [path.join(ROOT, 'dist', 'src', 'main.js')];
  // The app runs in its own process group, so that a stop reaches all of it: under
  // --watch that is `nest start` and the app it spawned, which a signal sent to
  // `nest` alone would orphan. Ctrl-C, a SIGTERM sent to us and a closed terminal
  // (SIGHUP) all stop the group.
  const app = spawn(process.execPath, args, { cwd: ROOT, env, stdio: 'inherit', detached: true });
  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(signal, () => {
      stopping = true;
      try {
        process.kill(-app.pid, 'SIGTERM');
      } catch {
        // the group is already gone
      }
    });
  }
  const code = await new Promise((resolve) => app.once('exit', (c, s) => resolve(c ?? (s ? 128 + 15 : 1))));
  // Everything in the app's group must be gone before its Redis goes: an app still
  // draining would otherwise lose its Redis mid-purchase.
  await groupGone(app.pid, GROUP_EXIT_MS);
  await Promise.all(lockNodes.map((n) => n.stop()));
  if (redis) {
    await redis.stop();
    log('embedded Redis stopped');
  }
  if (claimed) fs.rmSync(PID_FILE, { force: true });
  process.exit(stopping && code === 0 ? 0 : code);
}

// An older Node relaunches this file on Node 24 and only passes its signals on: the
// relaunched launcher is the one that owns the app's group and Redis, as below.
if (!relaunchOnSupportedNode()) {
  main().catch((err) => {
    log(err.stack ?? String(err));
    process.exit(1);
  });
}
