'use strict';
/**
 * `npm run faults`: install and build if needed, make sure redis-server exists,
 * then run the fault suite (bench/faults/run.ts).
 */
const path = require('node:path');
const { ROOT, log, relaunchOnSupportedNode, ensureDependencies, ensureBuilt } = require('./setup');
const { provideRedisServerOrExit } = require('./redis-server');
const { ensurePostgres } = require('./postgres-server');

if (!relaunchOnSupportedNode()) main();

function main() {
  ensureDependencies();
  ensureBuilt();
  provideRedisServerOrExit(log);
  // The settlement scenarios start their own PostgreSQL servers.
  ensurePostgres(log);
  require(path.join(ROOT, 'dist', 'bench', 'faults', 'run.js')).cli();
}
