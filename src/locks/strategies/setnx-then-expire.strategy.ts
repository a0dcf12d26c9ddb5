import { NaiveLock } from './naive-lock';

/**
 * `setnx-then-expire` — CLASSIC MISTAKE: `SETNX key token`, then `PEXPIRE key ttl`
 * as a second command; release with `DEL`.
 *
 * The usual fix for setnx-no-ttl, and still wrong: the two commands are not atomic.
 * A crash (or a lost connection) between them leaves a lock with no TTL, exactly
 * the forever-lock it meant to prevent. `SET key token NX PX ttl` (Redis 2.6.12+)
 * does both in one command. Under plain load it never fails: the window is one
 * round trip wide. Proven by classic-mistakes.spec.ts with a crash injected at
 * step `after-setnx`.
 */
export class SetnxThenExpireStrategy extends NaiveLock {
  async tryAcquire(key: string): Promise<string | null> {
    const token = this.token();
    if ((await this.redis.setnx(key, token)) !== 1) return null;
    await this.step('after-setnx');
    await this.redis.pexpire(key, this.options.ttlMs);
    return token;
  }

  async release(key: string): Promise<void> {
    await this.redis.del(key);
  }
}
