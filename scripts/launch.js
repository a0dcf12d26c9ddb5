'use strict';
/**
 * The steps every launcher behind an npm script takes before its own work, in one
 * place: run on a Node the project supports (relaunching itself on one if need be),
 * install the dependencies if they are missing, provide the servers and browser it
 * starts (redis-server, PostgreSQL, Chromium, nginx: found, or installed where that asks
 * nobody), and build dist/ if it is missing or older than the sources. Then its own
 * work. A new entry point is a few lines:
 *
 *   launch({ redis: true }, () => runBuilt('bench/settle-speed.js'));
 *
 * Zero dependencies: it runs before `npm ci` has.
 */
const path = require('node:path');
const { ROOT, log, relaunchOnSupportedNode, ensureDependencies, ensureBuilt } = require('./setup');

/**
 * @typedef {object} Steps
 * @property {{ announce?: boolean, min?: string }} [node]  relaunchOnSupportedNode's options
 * @property {boolean} [redis]     find or install redis-server, handed to what it starts as REDIS_SERVER
 * @property {boolean} [postgres]  find or install PostgreSQL (the servers it starts are private)
 * @property {boolean} [chromium]  find or install Chromium if it can (browser tests skip without it)
 * @property {boolean} [nginx]     find or install nginx if it can (the test behind nginx skips without it)
 * @property {boolean} [build]     build dist/ when it is older than the sources (default true)
 */

/**
 * Takes the steps, then runs `main`. On a Node older than the project's, it only
 * relaunches itself on a supported one (which takes the steps) and passes signals on.
 * `steps` may be a function, called once on the supported Node and before anything is
 * installed: a launcher that decides from its arguments and environment (and refuses
 * a bad one) does so there.
 * @param {Steps | (() => Steps)} steps
 * @param {() => unknown} main
 */
function launch(steps, main) {
  const node = typeof steps === 'function' ? undefined : steps.node;
  if (relaunchOnSupportedNode(node)) return;
  const want = typeof steps === 'function' ? steps() : steps;
  ensureDependencies();
  if (want.redis) require('./redis-server').provideRedisServerOrExit(log);
  if (want.postgres) require('./postgres-server').ensurePostgres(log);
  if (want.chromium) require('./chromium').provideChromium(log);
  if (want.nginx) require('./nginx').provideNginx(log);
  if (want.build ?? true) ensureBuilt();
  main();
}

/** Runs the built module `file` (a path under dist/): its `cli()` where it has one, else loading it runs it. */
function runBuilt(file) {
  const entry = require(path.join(ROOT, 'dist', file));
  if (typeof entry.cli === 'function') entry.cli();
}

/** Whether the launcher's own arguments include `--name` (as `--name value` or `--name=value`). */
function hasOption(name) {
  return process.argv.slice(2).some((a) => a === `--${name}` || a.startsWith(`--${name}=`));
}

module.exports = { ROOT, log, launch, runBuilt, hasOption };
