import { NaiveLock } from './naive-lock';

/**
 * `unchecked-del` — CLASSIC MISTAKE: a correct `SET key token NX PX ttl`, but
 * release with a plain `DEL key`, without checking the token.
 *
 * If a holder outlives its TTL (a slow query, a GC pause), the lock expires, a
 * second buyer takes it, and the first one's `DEL` then deletes the *second's*
 * lock: a third buyer gets in while the second still holds it. Two holders inside,
 * stock oversold. Release must compare-and-delete in one step (release-lock-1.lua).
 * Proven by classic-mistakes.spec.ts: a first holder outlives its TTL, and the
 * next two holders are inside at the same time.
 */
export class UncheckedDelStrategy extends NaiveLock {
  async tryAcquire(key: string): Promise<string | null> {
    const token = this.token();
    return (await this.redis.set(key, token, 'PX', this.options.ttlMs, 'NX')) === 'OK' ? token : null;
  }

  async release(key: string): Promise<void> {
    await this.redis.del(key);
  }
}
