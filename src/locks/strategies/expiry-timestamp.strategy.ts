import { NaiveLock } from './naive-lock';

/**
 * `expiry-timestamp` — CLASSIC MISTAKE: the pre-2.6.12 recipe. `SETNX key <expiry
 * time>`; if taken, `GET` it, and if that time has passed, `GETSET key <new expiry>`
 * and win if the old value GETSET returned is the one we read. Release: `DEL` if our
 * expiry has not passed yet.
 *
 * No key ever lacks a way out, but "expired" is judged by each client's own clock:
 * a client whose clock runs ahead sees a live lock as expired and steals it, and
 * both clients hold the lock. GETSET also overwrites the winner's value with the
 * losers' timestamps. Expiry must be Redis's (PX), not the clients'. Proven by
 * classic-mistakes.spec.ts with one client's clock set ahead.
 */
export class ExpiryTimestampStrategy extends NaiveLock {
  async tryAcquire(key: string): Promise<string | null> {
    const expiry = String(this.now() + this.options.ttlMs + 1);
    if ((await this.redis.setnx(key, expiry)) === 1) return expiry;
    const current = await this.redis.get(key);
    if (current === null || Number(current) >= this.now()) return null;
    // Looks expired by our clock: try to take it over.
    const previous = await this.redis.getset(key, expiry);
    return previous === current ? expiry : null;
  }

  async release(key: string, expiry: string): Promise<void> {
    if (this.now() < Number(expiry)) await this.redis.del(key);
  }
}
