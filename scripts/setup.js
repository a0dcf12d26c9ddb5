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
    'scripts/redis-server.js',
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

module.exports = { ROOT, log, ensureDependencies, ensureBuilt };
