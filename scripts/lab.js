'use strict';
/**
 * `npm run lab`: install and build if needed, make sure redis-server exists (every run
 * starts its own, as the bench and the fault suite do) and PostgreSQL (the fault
 * suite's settlement scenarios start their own servers), then serve the lab on
 * loopback (bench/lab/server.ts) and print `lab: http://127.0.0.1:<port>/`.
 */
const { launch, runBuilt } = require('./launch');

launch({ redis: true, postgres: true }, () => runBuilt('bench/lab/server.js'));
