import { randomBytes } from 'node:crypto';

/**
 * A run's id (its key prefixes, databases and, with --target, its products in a
 * deployment others may bench too): the time, base 36, then 24 random bits, so that two
 * runs started in the same millisecond (two machines at one deployment) never share one.
 * Lower-case letters and digits only: a PostgreSQL database name and a product id alike.
 */
export function newRunId(now = Date.now()): string {
  return `${now.toString(36)}${randomBytes(3).toString('hex')}`;
}
