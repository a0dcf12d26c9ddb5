'use strict';
/**
 * `npm run settle`: install and build if needed, then run a settler alone
 * (src/settle.ts) with the app's environment: DATABASE_URL and REDIS_URL (or
 * REDIS_CLUSTER_NODES) are required; it settles what the apps sold.
 */
const { launch, runBuilt } = require('./launch');

launch({}, () => runBuilt('src/settle.js'));
