/** What a verified token said, and until when this process may take it without verifying again. */
interface Verified {
  readonly sub: string;
  /** The token's `exp`, ms, plus the clock tolerance: past it, the token is expired. */
  readonly expiresAt: number;
  /** Verified this long ago at most: a key withdrawn from a JWKS stops counting within it. */
  readonly recheckAt: number;
}

/**
 * Tokens this process has verified, by their exact text: a buyer's next request with
 * the same token (a retry, a ticket poll) costs a map lookup instead of a signature
 * check (Envoy's jwt_authn keeps such a cache). Safe because the same text verifies the
 * same way under the same configuration; `exp` is still checked on every use, and an
 * entry is dropped after RECHECK_MS so a rotated-out key stops counting. Bounded: the
 * oldest entry goes first (a Map keeps insertion order).
 */
export class VerifiedTokens {
  private readonly entries = new Map<string, Verified>();

  constructor(
    private readonly maxEntries: number,
    private readonly recheckMs: number,
  ) {}

  /** The token's sub if it is cached and neither expired nor due a recheck; 'expired' if its exp passed; else undefined. */
  get(token: string, now = Date.now()): string | 'expired' | undefined {
    const entry = this.entries.get(token);
    if (entry === undefined) return undefined;
    if (now >= entry.expiresAt) {
      this.entries.delete(token);
      return 'expired';
    }
    if (now >= entry.recheckAt) {
      this.entries.delete(token);
      return undefined;
    }
    return entry.sub;
  }

  set(token: string, sub: string, expiresAt: number, now = Date.now()): void {
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(token, { sub, expiresAt, recheckAt: now + this.recheckMs });
  }

  get size(): number {
    return this.entries.size;
  }
}
