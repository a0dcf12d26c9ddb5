'use strict';
/**
 * `npm start`: install and build if needed, start a private Redis unless REDIS_URL
 * names one, then run the app; stop that Redis when the app exits.
 */
const { spawn } = require('node:child_process');
const { randomBytes } = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { ROOT, log, ensureDependencies, ensureBuilt } = require('./setup');
const { ensureRedisServer, startRedis } = require('./redis-server');

const DATA_DIR = path.join(ROOT, '.data', 'redis');
const PID_FILE = path.join(DATA_DIR, 'launcher.pid');

function isAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** One embedded Redis per data folder: two writing one AOF would corrupt it. */
function claimDataDir() {
  fs.mkdirSync(DATA_DIR, { recursive: true });
  const owner = fs.existsSync(PID_FILE) ? Number(fs.readFileSync(PID_FILE, 'utf8')) : 0;
  if (owner && owner !== process.pid && isAlive(owner)) {
    log(`another \`npm start\` (pid ${owner}) is using ${path.relative(ROOT, DATA_DIR)}; stop it first, or set REDIS_URL`);
    process.exit(1);
  }
  fs.writeFileSync(PID_FILE, String(process.pid));
}

async function main() {
  ensureDependencies();
  ensureBuilt();
  const env = { ...process.env };
  let redis = null;
  if (!env.REDIS_URL) {
    let bin;
    try {
      bin = ensureRedisServer(log);
    } catch (err) {
      log(err.message);
      process.exit(1);
    }
    claimDataDir();
    redis = await startRedis({ bin, dir: DATA_DIR, appendonly: true, detached: true });
    env.REDIS_URL = redis.url;
    log(`embedded Redis at ${redis.url} (pid ${redis.pid}, AOF everysec in ${path.relative(ROOT, DATA_DIR)}/)`);
  } else {
    log(`using REDIS_URL from the environment`);
  }
  const lockNodes = [];
  if (env.LOCK_STRATEGY === 'redlock' && !env.REDLOCK_URLS) {
    // Redlock needs independent nodes for the lock alone; they hold no sale data.
    const bin = ensureRedisServer(log);
    for (let i = 1; i <= 3; i++) {
      lockNodes.push(await startRedis({ bin, dir: path.join(ROOT, '.data', `redlock-${i}`), appendonly: false, detached: true }));
    }
    env.REDLOCK_URLS = lockNodes.map((n) => n.url).join(',');
    log(`embedded Redlock nodes at ${env.REDLOCK_URLS}`);
  }
  if (!env.ADMIN_TOKEN) {
    env.ADMIN_TOKEN = randomBytes(24).toString('base64url');
    log(`admin token (generated; set ADMIN_TOKEN to choose one): ${env.ADMIN_TOKEN}`);
  } else {
    log('admin token: the ADMIN_TOKEN you set');
  }

  const app = spawn(process.execPath, [path.join(ROOT, 'dist', 'main.js')], { cwd: ROOT, env, stdio: 'inherit' });
  // Ctrl-C reaches the app through the terminal; a SIGTERM sent to us is passed on.
  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.on(signal, () => {
      stopping = true;
      if (app.exitCode === null) app.kill('SIGTERM');
    });
  }
  const code = await new Promise((resolve) => app.once('exit', (c, s) => resolve(c ?? (s ? 128 + 15 : 1))));
  await Promise.all(lockNodes.map((n) => n.stop()));
  if (redis) {
    await redis.stop();
    fs.rmSync(PID_FILE, { force: true });
    log('embedded Redis stopped');
  }
  process.exit(stopping && code === 0 ? 0 : code);
}

main().catch((err) => {
  log(err.stack ?? String(err));
  process.exit(1);
});
