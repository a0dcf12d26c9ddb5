'use strict';
/**
 * Chromium for the browser tests (test/helpers/browser.ts): Debian's `chromium`
 * package, driven by playwright-core, which is never let download a browser of its
 * own. Zero dependencies, like redis-server.js: `npm test` provides it before Jest.
 */
const fs = require('node:fs');
const path = require('node:path');
const { provideOptional } = require('./apt');

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
 * For `npm test`: Chromium, installed where that asks nobody anything (scripts/apt.js
 * provideOptional), its path exported as $SECKILL_CHROMIUM to the tests; without one
 * the browser tests are skipped, and the run says so in one line.
 * @param {(line: string) => void} log
 * @returns {string | null}
 */
function provideChromium(log) {
  return provideOptional({
    find: findChromium,
    pkg: 'chromium',
    envName: CHROMIUM_ENV,
    tests: 'the browser tests',
    log,
  });
}

module.exports = { CHROMIUM_ENV, findChromium, provideChromium };
