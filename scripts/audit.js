'use strict';
/**
 * `npm run audit`: install and build if needed, then judge a sale that ran for real
 * from its stores (bench/audit/audit.ts): the Redis, and the PostgreSQL, it is given.
 */
const { launch, runBuilt } = require('./launch');

launch({}, () => runBuilt('bench/audit/audit.js'));
