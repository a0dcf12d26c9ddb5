'use strict';
/**
 * Chromium for the browser tests (test/helpers/browser.ts): Debian's `chromium`
 * package, driven by playwright-core, which is never let download a browser of its
 * own. Zero dependencies, like redis-server.js: `npm test` provides it before Jest.
 */
const fs = require('node:fs');
const path = require('node:path');
const { aptInstall, canAptInstall } = require('./apt');

/** The Chromium the tests run: set by `npm test` to what it found, or by you to choose another. */
const CHROMIUM_ENV = 'SECKILL_CHROMIUM';

/** @returns {string | null} absolute path of Chromium ($SECKILL_CHROMIUM, /usr/bin/chromium, or on PATH), or null. */
function findChromium() {
  const chosen = process.env[CHROMIUM_ENV];
  if (chosen) return isExecutable(chosen) ? chosen : null;
  for (const dir of ['/usr/bin', ...(process.env.PATH ?? '').split(path.delimiter)]) {
    if (!dir) continue;
    const candidate = path.join(dir, 'chromium');
    if (isExecutable(candidate)) return candidate;
  }
  return null;
}

function isExecutable(file) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * For `npm test`: finds Chromium, installing Debian's package first when that asks
 * nobody anything (root, apt-get), and exports its path as $SECKILL_CHROMIUM to the
 * tests. The browser tests are optional: when there is none, it says in one line that
 * they will be skipped, and the run goes on.
 * @param {(line: string) => void} log
 * @returns {string | null}
 */
function provideChromium(log) {
  let found = findChromium();
  if (!found && process.env[CHROMIUM_ENV]) {
    log(`${CHROMIUM_ENV}=${process.env[CHROMIUM_ENV]} is not an executable file: the browser tests will be skipped`);
    return null;
  }
  if (!found && canAptInstall()) {
    log(
      'chromium is not installed: installing Debian package chromium with apt-get (running as root) for the browser tests',
    );
    try {
      aptInstall('chromium', log);
      found = findChromium();
    } catch (err) {
      log(`${err.message}: the browser tests will be skipped`);
      return null;
    }
  }
  if (!found) {
    log(
      'chromium is not installed and cannot be installed here (that needs root and apt-get): the browser tests will be skipped (install Debian/Ubuntu package chromium, or set SECKILL_CHROMIUM=/path/to/chromium)',
    );
    return null;
  }
  process.env[CHROMIUM_ENV] = found;
  return found;
}

module.exports = { CHROMIUM_ENV, findChromium, provideChromium };
