import { NaiveLock } from './naive-lock';

/**
 * `setnx-no-ttl` — CLASSIC MISTAKE: `SETNX key token`, release with `DEL`.
 *
 * The first lock anyone writes. It excludes while everyone behaves, but the lock has
 * no expiry: a holder that crashes, is killed or loses its network before `DEL`
 * leaves the product locked forever, and every later buyer times out.
 * Proven by classic-mistakes.spec.ts: a holder dies, and the lock is still there,
 * with no TTL, long after any sane TTL, while others time out.
 */
export class SetnxNoTtlStrategy extends NaiveLock {
  async tryAcquire(key: string): Promise<string | null> {
    const token = this.token();
    return (await this.redis.setnx(key, token)) === 1 ? token : null;
  }

  async release(key: string): Promise<void> {
    await this.redis.del(key);
  }
}
