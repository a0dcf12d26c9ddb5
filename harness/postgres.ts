import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { startPostgres } from '../scripts/postgres-server';
import { track } from './processes';

export interface PrivatePostgres {
  /** postgres://seckill@127.0.0.1:<port>/postgres */
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  readonly dir: string;
  /** Fast shutdown; the folder stays, for a restart on it (start again with `port` and `dir`). */
  stop(): Promise<void>;
  /** SIGKILL. */
  kill(): void;
  /** SIGSTOP / SIGCONT to the server and every backend: a PostgreSQL that hangs. */
  pause(): void;
  resume(): void;
  readonly exited: Promise<void>;
  /** stop(), and remove the folder if this module made it. */
  remove(): Promise<void>;
  /** A new, empty database on this server, and its URL: one per app, test or bench row. */
  createDatabase(name: string): Promise<string>;
}

/**
 * Makes a database that took many writes quiet: VACUUM (ANALYZE) does now what
 * autovacuum would start within a minute, CHECKPOINT writes the dirty pages out (to the
 * kernel: the private server runs with fsync off), and sync(1) has the kernel write
 * them. Between bench rows, so that the next row, on the same cores, does not pay for
 * the last one's writes. Bounded: a PostgreSQL that hangs fails it in a minute.
 */
export async function quiesce(url: string): Promise<void> {
  const client = new Client({
    connectionString: url,
    connectionTimeoutMillis: 10_000,
    statement_timeout: 60_000,
    query_timeout: 60_000,
  });
  await client.connect();
  try {
    await client.query('VACUUM (ANALYZE)');
    await client.query('CHECKPOINT');
  } finally {
    await client.end();
  }
  // With fsync off the checkpoint only hands its pages to the kernel: flushed here too,
  // or the kernel writes them out during the next row.
  await promisify(execFile)('sync');
}

/**
 * A real PostgreSQL on a free loopback port with a data folder of its own (Debian's
 * binaries; as the postgres user when we are root), never a host's 5432, never a
 * mock. Tracked, so stopAll() stops it too.
 */
export async function startPrivatePostgres(options: { port?: number; dir?: string } = {}): Promise<PrivatePostgres> {
  const owned = options.dir === undefined;
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'seckill-pg-'));
  // mkdtemp makes it 0700 root's: the server's user owns it from here (postgres-server.js).
  if (owned) chmodSync(dir, 0o700);
  const server = await startPostgres({ dir, ...(options.port ? { port: options.port } : {}) });
  const pg: PrivatePostgres = {
    url: server.url,
    port: server.port,
    pid: server.pid,
    dir,
    stop: () => server.stop(),
    kill: () => server.kill(),
    pause: () => server.signal('SIGSTOP'),
    resume: () => server.signal('SIGCONT'),
    exited: server.exited,
    remove: async () => {
      running.delete();
      await server.stop();
      if (owned) rmSync(dir, { recursive: true, force: true });
    },
    createDatabase: async (name: string) => {
      if (!/^[a-z][a-z0-9_]{0,62}$/.test(name)) throw new Error(`not a database name: ${name}`);
      const client = new Client({ connectionString: server.url });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${name}`);
      } finally {
        await client.end();
      }
      return server.url.replace(/\/postgres$/, `/${name}`);
    },
  };
  const running = track({ stop: () => pg.remove() });
  return pg;
}
