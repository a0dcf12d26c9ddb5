'use strict';
/**
 * What `npm start` and `npm test` do before anything else on a fresh clone:
 * install dependencies if they are missing, and build if dist/ is missing or older
 * than the sources. Zero dependencies: it runs before `npm ci` has.
 */
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');

function log(line) {
  process.stderr.write(`[seckill] ${line}\n`);
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

/** Newest modification time of the files under `dir` (0 if none). */
function newest(dir) {
  let latest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    latest = Math.max(latest, fs.statSync(path.join(entry.parentPath ?? entry.path, entry.name)).mtimeMs);
  }
  return latest;
}

function ensureBuilt() {
  const main = path.join(ROOT, 'dist', 'main.js');
  const inputs = [path.join(ROOT, 'src'), ...['package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'nest-cli.json'].map((f) => path.join(ROOT, f))];
  const builtAt = fs.existsSync(main) ? fs.statSync(main).mtimeMs : 0;
  const changedAt = Math.max(...inputs.map((p) => (fs.statSync(p).isDirectory() ? newest(p) : fs.statSync(p).mtimeMs)));
  if (builtAt > changedAt) return;
  log(builtAt ? 'sources changed since the last build: building' : 'dist/ is missing: building');
  run(process.execPath, [path.join(ROOT, 'node_modules', '@nestjs', 'cli', 'bin', 'nest.js'), 'build']);
}

module.exports = { ROOT, log, ensureDependencies, ensureBuilt };
