import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { findNginx } from '../scripts/nginx';
import { onFreePort } from '../scripts/private-server';
import { setTimeout as sleep } from 'node:timers/promises';
import { track } from './processes';

export interface PrivateNginx {
  /** http://127.0.0.1:<port>: the one address in front of the upstreams. */
  readonly url: string;
  readonly pid: number;
  /** Its error log, for a failure's message. */
  readonly errorLog: string;
  /** SIGQUIT (nginx finishes the requests it holds), then waits for the exit. */
  stop(): Promise<void>;
}

/**
 * The compose `scale` profile's proxy (docker/nginx.conf) for upstreams on this machine:
 * round robin (no balancing directive), keep-alive to the apps, X-Forwarded-For set, and
 * a request passed to the next app only if it could not be sent to the first (never a
 * purchase twice). Everything nginx writes (pid, error log, temp files) is under `dir`.
 */
function nginxConf(dir: string, port: number, upstreams: readonly string[]): string {
  const hostPorts = upstreams.map((u) => new URL(u).host);
  return `daemon off;
master_process on;
worker_processes 1;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'error.log')} notice;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${join(dir, 'client_body')};
  proxy_temp_path ${join(dir, 'proxy')};
  fastcgi_temp_path ${join(dir, 'fastcgi')};
  uwsgi_temp_path ${join(dir, 'uwsgi')};
  scgi_temp_path ${join(dir, 'scgi')};
  upstream seckill {
${hostPorts.map((h) => `    server ${h};`).join('\n')}
    keepalive 64;
  }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://seckill;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_next_upstream error timeout;
      proxy_read_timeout 30s;
    }
  }
}
`;
}

/**
 * Debian's nginx as a private process in the foreground (`daemon off`) on a free loopback
 * port, in front of `upstreams` (the apps' http://127.0.0.1:<port> URLs), with a config
 * generated into `dir`; resolves once it answers HTTP (whatever its upstreams do). Tracked, so
 * stopAll() stops it too.
 */
export async function startPrivateNginx(dir: string, upstreams: readonly string[]): Promise<PrivateNginx> {
  const bin = findNginx();
  if (!bin) throw new Error('nginx not found: install Debian package nginx (npm test does, as root)');
  mkdirSync(dir, { recursive: true });
  // Run as root, nginx's workers run as nobody: they must reach the temp folders in here.
  chmodSync(dir, 0o755);
  const errorLog = join(dir, 'error.log');
  return onFreePort(undefined, 80, async (port) => {
    const conf = join(dir, 'nginx.conf');
    writeFileSync(conf, nginxConf(dir, port, upstreams));
    // -e: even what it says before reading the config goes to the error log in `dir`. Older
    // nginx (Debian 11, Ubuntu 20.04/22.04 ship 1.18) refuses the flag: there it says that
    // much to its compiled-in log (an alert where it may not write it) and starts all the same.
    const early = takesErrorLogFlag(bin) ? ['-e', errorLog] : [];
    const child = spawn(bin, ['-p', dir, '-c', conf, ...early], { stdio: 'ignore' });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const said = () => (existsSync(errorLog) ? readFileSync(errorLog, 'utf8').trim() : '');
    const failed = () =>
      child.exitCode === null ? null : `nginx on port ${port} exited (${child.exitCode}): ${said()}`;
    const nginx: PrivateNginx = {
      url: `http://127.0.0.1:${port}`,
      pid: child.pid!,
      errorLog,
      stop: async () => {
        tracked.delete();
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGQUIT');
        await exited;
      },
    };
    const tracked = track({ stop: () => nginx.stop() });
    await waitForAnswer(nginx.url, failed).catch(async (err: Error) => {
      await nginx.stop();
      // "Address already in use" is onFreePort's cue to try another port.
      throw new Error(`${err.message}\n${said()}`);
    });
    return nginx;
  });
}

/** Whether `nginx -v` names 1.19.5 or later, the first with -e (the error log before the config is read). */
function takesErrorLogFlag(bin: string): boolean {
  const said = spawnSync(bin, ['-v'], { encoding: 'utf8' });
  const [major, minor, patch] = (/nginx\/(\d+)\.(\d+)\.(\d+)/.exec(`${said.stderr}${said.stdout}`) ?? [])
    .slice(1)
    .map(Number);
  if (major === undefined) return false;
  return major > 1 || (major === 1 && (minor > 19 || (minor === 19 && patch >= 5)));
}

/** Until nginx answers any HTTP status at all (a 502 if no upstream is up): it is listening. */
async function waitForAnswer(url: string, failed: () => string | null): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const why = failed();
    if (why) throw new Error(why);
    if (
      await fetch(`${url}/health`).then(
        () => true,
        () => false,
      )
    )
      return;
    if (Date.now() > deadline) throw new Error(`nginx at ${url} did not answer within 10 s`);
    await sleep(20);
  }
}
