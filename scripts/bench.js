'use strict';
/**
 * `npm run bench` and `npm run demo`: install and build if needed, make sure
 * redis-server exists (unless --redis names a Redis), then run bench/bench.ts.
 */
const path = require('node:path');
const { ROOT, log, relaunchOnSupportedNode, ensureDependencies, ensureBuilt } = require('./setup');
const { provideRedisServerOrExit } = require('./redis-server');

if (!relaunchOnSupportedNode()) main();

function main() {
  ensureDependencies();
  ensureBuilt();
  if (!process.argv.includes('--redis') && !process.argv.some((a) => a.startsWith('--redis='))) {
    provideRedisServerOrExit(log);
  }
  require(path.join(ROOT, 'dist', 'bench', 'bench.js')).cli();
}
