import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Pool } from 'pg';

/** Where the migrations are: beside this module (nest-cli.json copies them into dist). */
const DIR = join(__dirname, 'migrations');

/** `<version>-<name>.sql`: applied in version order, each once. */
const FILE = /^(\d{3})-([a-z0-9-]+)\.sql$/;

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

/** Every migration file, in version order; two with one version is a mistake caught here. */
export function migrations(dir = DIR): Migration[] {
  const found = readdirSync(dir)
    .map((file) => ({ file, match: FILE.exec(file) }))
    .filter(({ match }) => match !== null)
    .map(({ file, match }) => ({
      version: Number(match![1]),
      name: match![2],
      sql: readFileSync(join(dir, file), 'utf8'),
    }))
    .sort((a, b) => a.version - b.version);
  found.forEach((m, i) => {
    if (i > 0 && found[i - 1].version === m.version) throw new Error(`two migrations numbered ${m.version}`);
  });
  return found;
}

/** Any number: the key of the advisory lock that makes concurrent start-ups migrate one at a time. */
const MIGRATION_LOCK = 7_310_457;

/**
 * Brings the schema up to date: plain numbered SQL files, all of them applied in one
 * transaction with the version table, so a start-up that dies half-way leaves the
 * schema as it was, and instances starting together (an advisory lock) apply each
 * once. Returns the versions it applied.
 */
export async function migrate(pool: Pool, all: readonly Migration[] = migrations()): Promise<number[]> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await client.query(
      `CREATE TABLE IF NOT EXISTS schema_migrations (
         version    integer     PRIMARY KEY,
         name       text        NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT now()
       )`,
    );
    const { rows } = await client.query<{ version: number }>('SELECT version FROM schema_migrations');
    const done = new Set(rows.map((r) => r.version));
    const applied: number[] = [];
    for (const m of all) {
      if (done.has(m.version)) continue;
      await client.query(m.sql);
      await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
      applied.push(m.version);
    }
    await client.query('COMMIT');
    return applied;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
