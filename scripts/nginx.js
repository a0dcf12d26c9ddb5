'use strict';
/**
 * nginx for the test that load-tests a deployment behind a load balancer
 * (test/bench-target.e2e-spec.ts, harness/nginx.ts): Debian's `nginx` package, its
 * binary run as a private process on a free port with a generated config. Zero
 * dependencies, like chromium.js: `npm test` provides it before Jest.
 */
const path = require('node:path');
const { provideOptional } = require('./apt');
const { findExecutable } = require('./private-server');

/** The nginx the tests run: set by `npm test` to what it found, or by you to choose another. */
const NGINX_ENV = 'SECKILL_NGINX';

/** @returns {string | null} absolute path of nginx ($SECKILL_NGINX, /usr/sbin/nginx, or on PATH), or null. */
function findNginx() {
  const chosen = process.env[NGINX_ENV];
  if (chosen) return findExecutable(path.basename(chosen), [path.dirname(chosen)]) === chosen ? chosen : null;
  return findExecutable('nginx', ['/usr/sbin']);
}

/**
 * For `npm test`: nginx, installed where that asks nobody anything (scripts/apt.js
 * provideOptional), its path exported as $SECKILL_NGINX; without one the nginx test is
 * skipped, and the run says so in one line.
 * @param {(line: string) => void} log
 * @returns {string | null}
 */
function provideNginx(log) {
  return provideOptional({
    find: findNginx,
    pkg: 'nginx',
    envName: NGINX_ENV,
    tests: 'the test behind nginx',
    // The tests run their own nginx on a free port: the package's on port 80 is nobody's.
    service: 'nginx',
    log,
  });
}

module.exports = { NGINX_ENV, findNginx, provideNginx };
