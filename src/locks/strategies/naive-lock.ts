import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { LockTimeoutError } from '../../errors/errors';
import { backoffMs } from '../backoff';
import type { LockFaults } from '../lock-faults';
import { Hold, Lock, UsingOptions } from '../lock';

export interface NaiveLockOptions {
  readonly ttlMs: number;
  readonly waitMs: number;
  readonly faults?: LockFaults;
}

/** The client commands the classic recipes use. */
export type NaiveRedis = Pick<Redis, 'set' | 'setnx' | 'pexpire' | 'get' | 'getset' | 'del'>;

/**
 * What every classic mistake shares, kept as naive as the recipes it teaches: spin
 * on tryAcquire with a jittered backoff, run the section, release. No local line,
 * no validity check, no hand-off: each subclass is one recipe's acquire and release.
 */
export abstract class NaiveLock implements Lock {
  /** Nothing here notices a lost hold: that is the point of these recipes. */
  readonly lostLocks = 0;
  private readonly never: Hold = { signal: new AbortController().signal, assertValid: () => undefined };

  constructor(
    protected readonly redis: NaiveRedis,
    protected readonly options: NaiveLockOptions,
  ) {}

  /** The token (value) we hold the lock with, or null if it is taken. */
  abstract tryAcquire(key: string): Promise<string | null>;
  abstract release(key: string, token: string): Promise<void>;

  async using<T>(key: string, section: (hold: Hold) => Promise<T>, options?: UsingOptions): Promise<T> {
    const deadline = options?.deadline ?? performance.now() + this.options.waitMs;
    for (let attempt = 0; ; attempt++) {
      options?.signal?.throwIfAborted();
      const token = await this.tryAcquire(key);
      if (token !== null) {
        try {
          return await section(this.never);
        } finally {
          await this.release(key, token);
        }
      }
      const left = deadline - performance.now();
      if (left <= 0) throw new LockTimeoutError(this.options.waitMs);
      await sleep(backoffMs(attempt, left));
    }
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  protected token(): string {
    return randomBytes(16).toString('hex');
  }

  protected async step(name: string): Promise<void> {
    await this.options.faults?.at?.(name);
  }

  protected now(): number {
    return this.options.faults?.now?.() ?? Date.now();
  }
}
