'use strict';
/**
 * Installs a Debian package that `npm start` or `npm test` needs (redis-server,
 * chromium) where that asks nobody anything: as root, with apt-get. Zero
 * dependencies: it runs before `npm ci` has.
 */
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');

const LISTS = '/var/lib/apt/lists';

/** Linux, root and apt-get: an install needs no password and no prompt. */
function canAptInstall() {
  return process.platform === 'linux' && process.getuid?.() === 0 && fs.existsSync('/usr/bin/apt-get');
}

/** Whether apt has package lists at all: container images usually ship without them. */
function hasPackageLists() {
  try {
    return fs.readdirSync(LISTS).some((name) => name.includes('_Packages'));
  } catch {
    return false;
  }
}

/**
 * `apt-get install -y --no-install-recommends <pkg>`. `apt-get update` runs first when
 * there are no package lists, and once more before a second try when the install
 * fails on the lists there are (stale ones name versions the mirror no longer has).
 * Throws when that still fails.
 * @param {string} pkg
 * @param {(line: string) => void} log
 */
function aptInstall(pkg, log) {
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  // A freshly booted machine may be running its own apt (apt-daily, unattended
  // upgrades): wait for its lock a while instead of failing at once.
  const apt = (...args) =>
    spawnSync('apt-get', ['-o', 'DPkg::Lock::Timeout=180', ...args], { stdio: ['ignore', 'inherit', 'inherit'], env })
      .status;
  const update = () => {
    const status = apt('update', '-q');
    if (status !== 0) throw new Error(`apt-get update -q failed (exit ${status})`);
  };
  const install = () => apt('install', '-y', '-q', '--no-install-recommends', pkg);
  if (hasPackageLists()) {
    if (install() === 0) return;
    log(`apt-get install ${pkg} failed on the package lists there were: updating them and trying again`);
  }
  update();
  const status = install();
  if (status !== 0) throw new Error(`apt-get install -y -q --no-install-recommends ${pkg} failed (exit ${status})`);
}

/** Debian's hook that invoke-rc.d asks before starting a service: 101 is "action forbidden". */
const POLICY_RC_D = '/usr/sbin/policy-rc.d';

/**
 * aptInstall for a package that ships a system service (nginx) the tests never use: the
 * install must not leave it running (nginx on port 80) or enabled at boot. A temporary
 * policy-rc.d answering 101 keeps the package's scripts from starting it (one already
 * there is left as it is); the service is disabled afterwards, as the packaging enabled it.
 * @param {string} pkg
 * @param {string} service
 * @param {(line: string) => void} log
 */
function aptInstallWithoutService(pkg, service, log) {
  const ours = !fs.existsSync(POLICY_RC_D);
  if (ours)
    fs.writeFileSync(POLICY_RC_D, '#!/bin/sh\n# scripts/apt.js: no service starts while it installs\nexit 101\n', {
      mode: 0o755,
    });
  try {
    aptInstall(pkg, log);
  } finally {
    if (ours) fs.rmSync(POLICY_RC_D, { force: true });
  }
  // Offline operations on the unit's and init script's links: they need no running systemd.
  for (const [bin, args] of [
    ['/usr/bin/deb-systemd-helper', ['disable', `${service}.service`]],
    ['/usr/sbin/update-rc.d', [service, 'disable']],
  ]) {
    if (fs.existsSync(bin)) spawnSync(bin, args, { stdio: 'ignore' });
  }
}

/**
 * What `find()` finds; where it finds nothing, Debian's package `pkg` installed first
 * where that asks nobody (canAptInstall), and found again. Throws `howTo` (what to
 * install, and how) where it cannot install, and `notFound` where the install did not
 * give what `find()` looks for.
 * @template T
 * @param {{ find: () => T | null, pkg: string, what: string, howTo: string, notFound: string, log: (line: string) => void }} wanted
 * @returns {T}
 */
function findOrAptInstall({ find, pkg, what, howTo, notFound, log }) {
  const found = find();
  if (found) return found;
  if (!canAptInstall()) throw new Error(howTo);
  log(`${what} is not installed: installing Debian package ${pkg} with apt-get (running as root)`);
  aptInstall(pkg, log);
  const installed = find();
  if (!installed) throw new Error(notFound);
  return installed;
}

/**
 * For `npm test`, a binary some tests need and the others do not (Chromium, nginx): found
 * (`$envName`, else where `find()` looks), or Debian's package `pkg` installed where that
 * asks nobody anything (root, apt-get), and its path exported as `$envName` to the tests.
 * Where there is none it says in one line that `tests` will be skipped, and the run goes on.
 * `service`: the system service the package ships, neither started nor left enabled.
 * @param {{ find: () => string | null, pkg: string, envName: string, tests: string, service?: string, log: (line: string) => void }} wanted
 * @returns {string | null}
 */
function provideOptional({ find, pkg, envName, tests, service, log }) {
  let found = find();
  if (!found && process.env[envName]) {
    log(`${envName}=${process.env[envName]} is not an executable file: ${tests} will be skipped`);
    return null;
  }
  if (!found && canAptInstall()) {
    const quiet = service
      ? ` (its ${service} service neither started nor enabled: policy-rc.d 101 during the install, disabled after)`
      : '';
    log(
      `${pkg} is not installed: installing Debian package ${pkg} with apt-get (running as root) for ${tests}${quiet}`,
    );
    try {
      if (service) aptInstallWithoutService(pkg, service, log);
      else aptInstall(pkg, log);
      found = find();
    } catch (err) {
      log(`${err.message}: ${tests} will be skipped`);
      return null;
    }
  }
  if (!found) {
    log(
      `${pkg} is not installed and cannot be installed here (that needs root and apt-get): ${tests} will be skipped (install Debian/Ubuntu package ${pkg}, or set ${envName}=/path/to/${pkg})`,
    );
    return null;
  }
  process.env[envName] = found;
  return found;
}

module.exports = { canAptInstall, aptInstall, findOrAptInstall, provideOptional };
