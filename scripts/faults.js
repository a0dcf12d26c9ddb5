'use strict';
/**
 * `npm run faults`: install and build if needed, make sure redis-server exists, and
 * PostgreSQL (the settlement scenarios start their own servers), then run the fault
 * suite (bench/faults/run.ts).
 */
const { launch, runBuilt } = require('./launch');

launch({ redis: true, postgres: true }, () => runBuilt('bench/faults/run.js'));
