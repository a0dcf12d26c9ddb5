'use strict';
/**
 * `npm run bench` and `npm run demo`: install and build if needed, make sure
 * redis-server exists (unless --redis names a Redis) and PostgreSQL (unless
 * --settle off, or --target: each row settles into a private one), then run bench/bench.ts.
 */
const { launch, runBuilt, hasOption } = require('./launch');

launch(
  {
    redis: !hasOption('redis'),
    // Unless every row is `--settle off`: `--settle off,on` still settles one. A --target
    // run settles into nothing of the bench's: its --database is the deployment's.
    postgres: !hasOption('target') && !/--settle(=|\s+)off(\s|$)/.test(process.argv.slice(2).join(' ')),
  },
  () => runBuilt('bench/bench.js'),
);
