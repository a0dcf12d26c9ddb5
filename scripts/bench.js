'use strict';
/**
 * `npm run bench` and `npm run demo`: install and build if needed, make sure
 * redis-server exists (unless --redis names a Redis), then run bench/bench.ts.
 */
const path = require('node:path');
const { ROOT, log, relaunchOnSupportedNode, ensureDependencies, ensureBuilt } = require('./setup');
const { provideRedisServerOrExit } = require('./redis-server');
const { ensurePostgres } = require('./postgres-server');

if (!relaunchOnSupportedNode()) main();

function main() {
  ensureDependencies();
  ensureBuilt();
  if (!process.argv.includes('--redis') && !process.argv.some((a) => a.startsWith('--redis='))) {
    provideRedisServerOrExit(log);
  }
  // Each row settles into a private PostgreSQL, unless --settle off.
  if (!/--settle(=|\s+)off/.test(process.argv.slice(2).join(' '))) ensurePostgres(log);
  require(path.join(ROOT, 'dist', 'bench', 'bench.js')).cli();
}
