'use strict';
/**
 * `npm run bench:settle -- [entries] [batch]`: install and build if needed, make sure
 * redis-server and PostgreSQL exist, then time the settler alone (bench/settle-speed.ts).
 */
const { launch, runBuilt } = require('./launch');

launch({ redis: true, postgres: true }, () => runBuilt('bench/settle-speed.js'));
