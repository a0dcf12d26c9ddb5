'use strict';
/**
 * `npm run faults`: install and build if needed, make sure redis-server exists,
 * then run the fault suite (bench/faults.ts).
 */
const path = require('node:path');
const { ROOT, log, ensureDependencies, ensureBuilt } = require('./setup');
const { provideRedisServerOrExit } = require('./redis-server');

ensureDependencies();
ensureBuilt('app');
ensureBuilt('bench');
provideRedisServerOrExit(log);
require(path.join(ROOT, 'bench', 'dist', 'bench', 'faults.js')).cli();
