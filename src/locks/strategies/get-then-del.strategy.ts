import { NaiveLock } from './naive-lock';

/**
 * `get-then-del` — CLASSIC MISTAKE: `SET key token NX PX ttl`, release by `GET key`,
 * compare with our token in the client, then `DEL key`.
 *
 * It checks the owner, but in two commands: between the GET (still ours) and the
 * DEL the lock can expire and be taken by another buyer, and the DEL deletes the
 * new owner's lock, letting a third in beside it. The compare and the delete must
 * be one atomic step (release-lock-1.lua). Under plain load the window is one round
 * trip; proven by classic-mistakes.spec.ts with a pause injected at step
 * `release:after-get`.
 */
export class GetThenDelStrategy extends NaiveLock {
  async tryAcquire(key: string): Promise<string | null> {
    const token = this.token();
    return (await this.redis.set(key, token, 'PX', this.options.ttlMs, 'NX')) === 'OK' ? token : null;
  }

  async release(key: string, token: string): Promise<void> {
    if ((await this.redis.get(key)) !== token) return;
    await this.step('release:after-get');
    await this.redis.del(key);
  }
}
