'use strict';
/**
 * `npm run lint`, `npm run format` and `npm run typecheck`: install dependencies if
 * they are missing, then run the tool. Lint is ESLint (typescript-eslint, with the
 * import boundaries in eslint.config.mjs) and Prettier's check; format writes what
 * Prettier would; typecheck runs tsc over src, test, bench and harness, specs included.
 */
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { ROOT, launch } = require('./launch');

const bin = (pkg, file) => path.join(ROOT, 'node_modules', pkg, file);
const TOOLS = {
  lint: [
    [bin('eslint', 'bin/eslint.js'), '--max-warnings', '0', '.'],
    [bin('prettier', 'bin/prettier.cjs'), '--check', '--log-level', 'warn', '.'],
  ],
  format: [[bin('prettier', 'bin/prettier.cjs'), '--write', '--log-level', 'warn', '.']],
  typecheck: [[bin('typescript', 'bin/tsc'), '--noEmit', '-p', 'tsconfig.json']],
};

const task = process.argv[2];

// The tools need the dependencies, not a build.
launch(() => {
  if (!(task in TOOLS)) {
    process.stderr.write(`usage: node scripts/check.js ${Object.keys(TOOLS).join('|')}\n`);
    process.exit(2);
  }
  return { build: false };
}, main);

function main() {
  for (const args of TOOLS[task]) {
    const status = spawnSync(process.execPath, args, { cwd: ROOT, stdio: 'inherit' }).status ?? 1;
    if (status !== 0) process.exit(status);
  }
}
