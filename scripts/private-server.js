'use strict';
/**
 * What starting a private server takes, whichever server it is (redis-server.js,
 * postgres-server.js): its binary found, a free loopback port (taken again if another
 * process won the race for it), and the process started and waited for until its
 * output says it is ready. Zero dependencies: it runs before `npm ci` has.
 */
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');

/**
 * The first executable `name` in `first`, then on PATH, then in the system folders.
 * @param {string} name
 * @param {string[]} [first]
 * @returns {string | null}
 */
function findExecutable(name, first = []) {
  const dirs = [...first, ...(process.env.PATH ?? '').split(path.delimiter), '/usr/bin', '/usr/sbin', '/usr/local/bin'];
  for (const dir of dirs) {
    const candidate = path.join(dir, name);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = /** @type {net.AddressInfo} */ (server.address());
      server.close(() => resolve(port));
    });
  });
}

/**
 * `start(port)` on `fixed`, or on a free port that is never `wellKnown` (the host's
 * own server's, 6379 or 5432), with up to five tries: another process may take the
 * free port between the probe and the bind.
 * @template T
 * @param {number | undefined} fixed
 * @param {number} wellKnown
 * @param {(port: number) => Promise<T>} start
 * @returns {Promise<T>}
 */
async function onFreePort(fixed, wellKnown, start) {
  for (let attempt = 1; ; attempt++) {
    const port = fixed ?? (await freePort());
    if (port === wellKnown && fixed !== wellKnown) continue;
    try {
      return await start(port);
    } catch (err) {
      if (fixed !== undefined || attempt >= 5 || !/already in use/.test(String(err))) throw err;
    }
  }
}

/**
 * Spawns `bin` and resolves, with the child and `exited` (resolves once it has exited,
 * for any reason), when its output matches `ready`. Rejects if it exits first, with
 * what it wrote: on 'close', which comes once its output is read too ('exit' may come
 * first, and a refusal told without its last lines, "Address already in use", could
 * not say why).
 * @param {{ name: string, port: number, bin: string, args: string[], ready: RegExp, spawn?: import('node:child_process').SpawnOptions }} server
 * @returns {Promise<{ child: import('node:child_process').ChildProcess, exited: Promise<void> }>}
 */
function spawnUntilReady({ name, port, bin, args, ready, spawn: options = {} }) {
  const child = spawn(bin, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const exited = new Promise((resolve) => child.once('exit', () => resolve(undefined)));
  const closed = new Promise((resolve) => child.once('close', (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    const onData = (chunk) => {
      output += chunk;
      if (!ready.test(output)) return;
      for (const stream of [child.stdout, child.stderr]) stream.off('data', onData).resume();
      resolve({ child, exited });
    };
    child.stdout.setEncoding('utf8').on('data', onData);
    child.stderr.setEncoding('utf8').on('data', onData);
    child.once('error', reject);
    closed.then(({ code, signal }) =>
      reject(new Error(`${name} on port ${port} exited (${signal ?? code}) before it was ready:\n${output.trim()}`)),
    );
  });
}

module.exports = { findExecutable, freePort, onFreePort, spawnUntilReady };
