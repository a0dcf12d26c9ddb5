'use strict';
/**
 * `npm run lab:shards`: the lab's shard lessons from the command line (the lab runs the
 * same): install and build if needed, make sure redis-server exists (the sale starts
 * its own Redis Cluster), then run bench/lab/shard-sale.ts.
 */
const { launch, runBuilt } = require('./launch');

launch({ redis: true }, () => runBuilt('bench/lab/shard-sale.js'));
