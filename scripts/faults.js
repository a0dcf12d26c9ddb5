'use strict';
/**
 * `npm run faults`: install and build if needed, make sure redis-server exists,
 * then run the fault suite (bench/faults.ts).
 */
const path = require('node:path');
const { ROOT, log, ensureDependencies, ensureBuilt } = require('./setup');
const { ensureRedisServer } = require('./redis-server');

ensureDependencies();
ensureBuilt('app');
ensureBuilt('bench');
try {
  process.env.REDIS_SERVER = ensureRedisServer(log);
} catch (err) {
  log(err.message);
  process.exit(1);
}
require(path.join(ROOT, 'bench', 'dist', 'bench', 'faults.js')).cli();
