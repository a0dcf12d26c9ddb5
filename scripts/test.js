'use strict';
/**
 * `npm test`: install and build if needed, make sure redis-server exists (the tests
 * start their own on free ports), then run every Jest test. Extra arguments go to
 * Jest: `npm test -- test/orders.e2e-spec.ts`.
 */
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const { ROOT, log, ensureDependencies, ensureBuilt } = require('./setup');
const { ensureRedisServer } = require('./redis-server');

ensureDependencies();
try {
  process.env.REDIS_SERVER = ensureRedisServer(log);
} catch (err) {
  log(err.message);
  process.exit(1);
}
// The process and bench tests run the built app and bench as real processes.
ensureBuilt('app');
ensureBuilt('bench');
const jest = path.join(ROOT, 'node_modules', 'jest', 'bin', 'jest.js');
const result = spawnSync(process.execPath, [jest, ...process.argv.slice(2)], { cwd: ROOT, stdio: 'inherit' });
process.exit(result.status ?? 1);
