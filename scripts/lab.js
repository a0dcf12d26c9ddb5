'use strict';
/**
 * `npm run lab`: install and build if needed, make sure redis-server exists (every run
 * starts its own, as the bench and the fault suite do), then serve the lab on loopback
 * (bench/lab/server.ts) and print `lab: http://127.0.0.1:<port>/`.
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
  // The fault suite's settlement scenarios start their own PostgreSQL servers.
  ensurePostgres(log);
  require(path.join(ROOT, 'dist', 'bench', 'lab', 'server.js')).cli();
}
