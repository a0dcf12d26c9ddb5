'use strict';
/**
 * `npm run bench` and `npm run demo`: install and build if needed, make sure
 * redis-server exists (unless --redis names a Redis) and PostgreSQL (unless
 * --settle off: each row settles into a private one), then run bench/bench.ts.
 */
const { launch, runBuilt, hasOption } = require('./launch');

launch(
  {
    redis: !hasOption('redis'),
    // Unless every row is `--settle off`: `--settle off,on` still settles one.
    postgres: !/--settle(=|\s+)off(\s|$)/.test(process.argv.slice(2).join(' ')),
  },
  () => runBuilt('bench/bench.js'),
);
