'use strict';
/**
 * `npm run bench:settle -- [entries] [batch]`: install and build if needed, make sure
 * redis-server and PostgreSQL exist, then time the settler alone (bench/settle-speed.ts).
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
  ensurePostgres(log);
  require(path.join(ROOT, 'dist', 'bench', 'settle-speed.js')).cli();
}
