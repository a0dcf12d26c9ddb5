'use strict';
/**
 * A private PostgreSQL for `npm start`, the bench, the fault suite and the tests, started
 * the way scripts/redis-server.js starts redis-server: Debian's binaries
 * (/usr/lib/postgresql/<version>/bin, installed with apt-get when missing and running as
 * root), a data folder of its own, a free loopback port, never a host's 5432.
 * PostgreSQL refuses to run as root: as root, initdb and the server run as the
 * `postgres` system user (the Debian package creates it), which owns the data folder.
 * Zero dependencies: it runs before `npm ci` has.
 */
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { findOrAptInstall } = require('./apt');
const { onFreePort, spawnUntilReady } = require('./private-server');

const DEFAULT_PORT = 5432;
/** The role the app connects as (superuser of its private cluster; trust on loopback only). */
const USER = 'seckill';

/** The bin folder of the newest PostgreSQL Debian has installed, or null. */
function findPostgresBin() {
  const root = '/usr/lib/postgresql';
  let versions;
  try {
    versions = fs.readdirSync(root).filter((v) => fs.existsSync(path.join(root, v, 'bin', 'postgres')));
  } catch {
    return null;
  }
  versions.sort((a, b) => Number(b) - Number(a));
  return versions.length ? path.join(root, versions[0], 'bin') : null;
}

/**
 * The bin folder, installing Debian's `postgresql` first where that asks nobody anything
 * (root with apt-get). Otherwise throws an error that says what to install.
 * @param {(line: string) => void} log
 */
function ensurePostgres(log) {
  return findOrAptInstall({
    find: findPostgresBin,
    pkg: 'postgresql',
    what: 'PostgreSQL',
    howTo: [
      'PostgreSQL is not installed (looked in /usr/lib/postgresql/<version>/bin). Install it, or set DATABASE_URL:',
      '  Debian/Ubuntu:  sudo apt-get install -y postgresql',
    ].join('\n'),
    notFound: 'apt-get installed postgresql but /usr/lib/postgresql/<version>/bin/postgres is missing',
    log,
  });
}

/** uid/gid to run as: the `postgres` system user when we are root (PostgreSQL refuses root), else ourselves. */
function runAs() {
  if (process.getuid?.() !== 0) return {};
  const line = fs
    .readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  if (!line) throw new Error('running as root, and there is no `postgres` system user to run PostgreSQL as');
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** The first folder above `dir` that others may not search (so the postgres user cannot reach `dir`), or null. */
function unreachableParent(dir) {
  for (let up = path.dirname(path.resolve(dir)); ; up = path.dirname(up)) {
    if (fs.existsSync(up) && (fs.statSync(up).mode & 0o001) === 0) return up;
    if (up === path.dirname(up)) return null;
  }
}

/**
 * Where `npm start` keeps its PostgreSQL: `preferred` (.data/postgres), unless we are
 * root and the postgres user, which the server runs as, cannot reach it (a checkout in
 * a private folder such as /root): then a folder of its own under /var/tmp, named by
 * the checkout so that each keeps its data across restarts, and said in the log.
 * @param {string} preferred
 * @param {(line: string) => void} log
 */
function dataDirFor(preferred, log) {
  if (process.getuid?.() !== 0) return preferred;
  const blocked = unreachableParent(preferred);
  if (!blocked) return preferred;
  const hash = require('node:crypto').createHash('sha1').update(path.resolve(preferred)).digest('hex').slice(0, 12);
  const dir = path.join('/var/tmp', `seckill-postgres-${hash}`);
  log(`the postgres user cannot reach ${preferred} (${blocked} is private): PostgreSQL's data goes to ${dir}`);
  return dir;
}

/**
 * A data folder the server's user owns, 0700, with a cluster in it (initdb once; a
 * folder that has one is kept: `npm start` restarts on the same data).
 */
function initDataDir(bin, dir, as) {
  // The server's user must be able to reach its folder through every parent.
  const blocked = as.uid !== undefined ? unreachableParent(dir) : null;
  if (blocked) {
    throw new Error(
      `PostgreSQL runs as the postgres user, who cannot reach ${dir}: ${blocked} is not searchable by others (chmod o+x it, or use another folder)`,
    );
  }
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (as.uid !== undefined) fs.chownSync(dir, as.uid, as.gid);
  fs.chmodSync(dir, 0o700);
  if (fs.existsSync(path.join(dir, 'PG_VERSION'))) return;
  const init = spawnSync(
    path.join(bin, 'initdb'),
    ['-D', dir, '-U', USER, '--auth=trust', '--encoding=UTF8', '--locale=C', '--no-instructions'],
    { encoding: 'utf8', ...as, cwd: '/' },
  );
  if (init.status !== 0)
    throw new Error(`initdb -D ${dir} failed (exit ${init.status}):\n${init.stderr || init.stdout}`);
}

/**
 * @typedef {object} PostgresOptions
 * @property {string} dir        data folder (created; initdb once)
 * @property {number} [port]     fixed port; default: a free one (retried on a race)
 * @property {boolean} [durable] fsync on (default false: tests and bench use throwaway data)
 * @property {boolean} [detached] own process group, so a terminal's Ctrl-C reaches only
 *                                the app, which the launcher then stops first
 * @property {string} [bin]      bin folder (default: the newest Debian one)
 *
 * @typedef {object} RunningPostgres
 * @property {string} url        postgres://seckill@127.0.0.1:<port>/postgres
 * @property {number} port
 * @property {number} pid
 * @property {string} dir
 * @property {() => Promise<void>} stop   fast shutdown (SIGINT: rolls back open transactions) and wait
 * @property {() => void} kill            SIGKILL, for fault tests
 * @property {(signal: 'SIGSTOP' | 'SIGCONT') => void} signal  pause or resume the postmaster and its backends
 * @property {Promise<void>} exited
 */

/**
 * Starts postgres and resolves once it accepts connections.
 * @param {PostgresOptions} options
 * @returns {Promise<RunningPostgres>}
 */
async function startPostgres(options) {
  const bin = options.bin ?? findPostgresBin();
  if (!bin)
    throw new Error('PostgreSQL not found: run `npm test` or `npm start` once to install it, or set DATABASE_URL');
  const dir = path.resolve(options.dir);
  const as = runAs();
  initDataDir(bin, dir, as);
  return onFreePort(options.port, DEFAULT_PORT, (port) => launch(bin, dir, port, as, options));
}

/** @returns {Promise<RunningPostgres>} */
async function launch(bin, dir, port, as, options) {
  const durable = options.durable ?? false;
  const args = [
    '-D',
    dir,
    '-p',
    String(port),
    '-c',
    'listen_addresses=127.0.0.1',
    // No Unix socket: its path would be long (a temporary folder) and nothing uses it.
    '-c',
    'unix_socket_directories=',
    '-c',
    `fsync=${durable ? 'on' : 'off'}`,
    '-c',
    `synchronous_commit=${durable ? 'on' : 'off'}`,
    '-c',
    `full_page_writes=${durable ? 'on' : 'off'}`,
    '-c',
    'max_connections=200',
    '-c',
    'logging_collector=off',
  ];
  // postgres logs to stderr.
  const { child, exited } = await spawnUntilReady({
    name: 'postgres',
    port,
    bin: path.join(bin, 'postgres'),
    args,
    ready: /database system is ready to accept connections/,
    spawn: { detached: options.detached ?? false, cwd: '/', ...as },
  });
  return {
    url: `postgres://${USER}@127.0.0.1:${port}/postgres`,
    port,
    pid: child.pid,
    dir,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        // A paused server cannot hear SIGINT: wake it first.
        child.kill('SIGCONT');
        child.kill('SIGINT');
      }
      await exited;
    },
    kill: () => {
      child.kill('SIGKILL');
    },
    signal: (signal) => {
      // The postmaster and every backend: a pause of the postmaster alone would leave
      // running backends answering queries.
      spawnSync('pkill', [`-${signal.slice(3)}`, '-P', String(child.pid)]);
      child.kill(signal);
    },
    exited,
  };
}

module.exports = { dataDirFor, ensurePostgres, findPostgresBin, startPostgres, POSTGRES_USER: USER };
