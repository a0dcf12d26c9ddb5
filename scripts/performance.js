'use strict';
/**
 * `npm run perf`: install and build if needed, then regenerate the generated
 * part of docs/performance.md from real bench runs (bench/performance.ts).
 */
const path = require('node:path');
const { ROOT, relaunchOnSupportedNode, ensureDependencies, ensureBuilt } = require('./setup');

if (!relaunchOnSupportedNode()) main();

function main() {
  ensureDependencies();
  ensureBuilt();
  require(path.join(ROOT, 'dist', 'bench', 'performance.js')).cli();
}
