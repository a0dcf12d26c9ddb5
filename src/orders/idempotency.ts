import { Inject, Injectable, Logger } from '@nestjs/common';
import type { RedisClient } from '../redis/create-client';
import { createHash, randomBytes } from 'node:crypto';
import { LOCKS_CONFIG, LocksConfig } from '../locks/locks.config';
import {
  AdmissionInvalidError,
  IdempotencyKeyInUseError,
  IdempotencyKeyMismatchError,
  OutcomeUnknownError,
  ValidationFailedError,
} from '../errors/errors';
import { execAll } from '../redis/exec-all';
import { KeyLayout } from '../redis/key-layout';
import { productOfBucket } from '../sale/buckets';
import {
  idempotencyAcknowledged,
  idempotencyClaim,
  idempotencyClaimKeys,
  idempotencyRelease,
} from '../redis/lua-scripts';
import { REDIS_CLIENT } from '../redis/redis.constants';
import { Claim, Order, OrderLine, OrderRequest, OUTCOME_TTL_MS } from './order';
import { OrderOutcomes } from './order-outcomes';
import { PurchasePath } from './purchases/purchase-path';

/** Longest Idempotency-Key accepted (the draft sets none; Stripe's is 255). */
const MAX_KEY_LENGTH = 255;

/**
 * Beyond the wait for the lock, how long a purchase may still be in flight: the
 * locked read, the write and the release, each bounded by the client's 2 s command
 * timeout, plus slack. A claim older than the wait plus this was abandoned (its
 * process died), and a retry takes it over.
 */
const IN_FLIGHT_SLACK_MS = 7_000;

/**
 * The Idempotency-Key header's value: an sf-string as the IETF httpapi draft writes it
 * (`"8e03978e-..."`), or the bare token most clients send. Visible ASCII only.
 */
export function parseIdempotencyKey(raw: string): string {
  const quoted = /^"(.*)"$/.exec(raw.trim());
  const key = quoted ? quoted[1] : raw.trim();
  if (key.length === 0 || key.length > MAX_KEY_LENGTH || !/^[\x21-\x7e]+$/.test(key) || /["\\]/.test(key)) {
    const rule = `Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} visible ASCII characters (optionally in double quotes), without " or \\`;
    throw new ValidationFailedError(rule, [{ field: 'Idempotency-Key', messages: [rule] }]);
  }
  return key;
}

/**
 * With BUYER_AUTH, a key is the buyer's own: `@<sub> <key>`, so a key one buyer took
 * first is never another's 422. It holds a space, so no header's key is ever one, and it
 * never starts with `pass ` (a pass purchase's key, passClaimKey()).
 */
export function buyerScopedKey(key: string, buyer: string | null): string {
  return buyer === null ? key : `@${buyer} ${key}`;
}

/** Why idempotency-claim-3.lua refused a pass, as ADMISSION_INVALID says it. */
const PASS_REFUSALS = {
  unknown: 'is not a pass this sale issued',
  owner: "is another buyer's",
  expired: 'has expired',
} as const;

/** What a keyed request came to. */
export interface KeyedPurchase {
  readonly order: Order;
  /** Placed before, by an earlier request with the key: nothing was written now. */
  readonly replayed: boolean;
  /** A replay: how many replicas are noted as having acknowledged its order (REDIS_WAIT_REPLICAS); 0 when none is. */
  readonly acknowledgedBy: number;
}

/**
 * POST /api/orders with an Idempotency-Key (IETF httpapi "The Idempotency-Key HTTP
 * Header Field"): the first request with a key claims it, in Redis, next to the
 * product's sale; the write that places its order replaces the claim with the outcome
 * in the same atomic step. A retry with the same key and body is answered that
 * outcome (the same orderId) and writes nothing; with another body, 422; while the
 * first is still being decided, 409. A request refused with nothing written, or whose
 * write's answer was lost (OUTCOME_UNKNOWN), gives its claim up: a retry then decides
 * afresh, and the lost write, should it still arrive, no longer matches a claim and
 * writes nothing (under the strategies whose write is a script: fenced, atomic; and
 * optimistic, whose late EXEC a retry's sale makes Redis refuse).
 */
@Injectable()
export class Idempotency {
  private readonly logger = new Logger('Idempotency');
  private readonly claimTtlMs: number;

  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly keys: KeyLayout,
    private readonly purchases: PurchasePath,
    @Inject(LOCKS_CONFIG.token) config: LocksConfig,
    private readonly outcomes: OrderOutcomes,
  ) {
    this.claimTtlMs = config.lockWaitMs + IN_FLIGHT_SLACK_MS;
  }

  /**
   * The order for `line` under `key`: placed now, or the one placed before (`replayed`).
   * The key is looked up first: a retry is answered what became of it (its order, 409,
   * 422) whatever the pass or `beforeWrite` would say. With `pass` (an Admission-Pass,
   * whose purchase `key` is: passClaimKey()), the key is claimed only if the pass is
   * this product's queue's, the buyer's and not lapsed, checked in the same step as the
   * claim (idempotency-claim-3.lua): else ADMISSION_INVALID, and nothing is claimed. Only
   * a request that claimed the key runs `beforeWrite` (a pre-check that may refuse); if
   * it throws, the claim is given up and nothing was written.
   */
  async purchase(
    line: OrderLine,
    key: string,
    beforeWrite?: () => Promise<void>,
    pass?: string,
  ): Promise<KeyedPurchase> {
    const k = this.keys.product(line.productId);
    const claim: Claim = { key, claimId: randomBytes(12).toString('base64url'), fingerprint: fingerprintOf(line) };
    // A pass bought in a home bucket other than bucket 0, where the queue issued it: its
    // record read from there, and judged by the claim as a record of its own would be.
    const queuedIn = productOfBucket(line.productId);
    const [passRecord, passEpoch] =
      pass === undefined || queuedIn === line.productId ? ['', ''] : await this.passRecord(queuedIn, pass);
    const [status, a, b, c, d] = await idempotencyClaim.run(
      this.redis,
      idempotencyClaimKeys(k),
      key,
      claim.claimId,
      claim.fingerprint,
      this.claimTtlMs,
      OUTCOME_TTL_MS,
      pass ?? '',
      line.userId,
      passRecord,
      passEpoch,
    );
    if (status === 'DONE') {
      // A replay says what became of the order since (paid, cancelled, expired), as
      // GET /api/orders/:orderId would: the first answer's `remaining`, today's status.
      const now = await this.outcomes.get(a);
      const order: Order = {
        orderId: a,
        productId: line.productId,
        userId: line.userId,
        quantity: b,
        remaining: c,
        status: now.status,
      };
      return { order, replayed: true, acknowledgedBy: d };
    }
    if (status === 'MISMATCH') throw new IdempotencyKeyMismatchError();
    if (status === 'IN_FLIGHT') throw new IdempotencyKeyInUseError(a);
    if (status === 'PASS_INVALID') throw new AdmissionInvalidError(PASS_REFUSALS[a]);
    try {
      await beforeWrite?.();
      // A pass's expiry: the write checks it again by Redis's clock, so a purchase that
      // waited for the lock past it buys nothing.
      const order: OrderRequest = pass === undefined ? { ...line, claim } : { ...line, claim, passExpiresAt: a };
      return { order: await this.purchases.purchase(order), replayed: false, acknowledgedBy: 0 };
    } catch (err) {
      // Its claim passed to another request already; nothing of ours to give up.
      if (!(err instanceof IdempotencyKeyInUseError)) await this.giveUp(k.idem, claim, err);
      throw err;
    }
  }

  /**
   * A pass's record in the queue of bucket 0 (`productId`), '-' for none, and that
   * bucket's sale epoch, read in one step: the home bucket's claim judges the record only
   * while its own sale is that one.
   */
  private async passRecord(productId: string, pass: string): Promise<[string, string]> {
    const k = this.keys.product(productId);
    const [record, epoch] = (await execAll(this.redis.multi().hget(k.queue, `x:${pass}`).hget(k.meta, 'epoch'))) as (
      string | null
    )[];
    return [record ?? '-', epoch ?? ''];
  }

  /**
   * Notes that `replicas` replicas acknowledged the order `key` holds (WAIT said so), so
   * that a retry is answered it without another WAIT. Best effort: without the note a
   * retry only WAITs again.
   */
  async noteAcknowledged(productId: string, key: string, orderId: string, replicas: number): Promise<void> {
    const { idem } = this.keys.product(productId);
    await idempotencyAcknowledged.run(this.redis, [idem], key, orderId, replicas).catch(() => undefined);
  }

  /** Best effort: if Redis does not answer, the claim lapses after claimTtlMs instead. */
  private async giveUp(idem: string, claim: Claim, why: unknown): Promise<void> {
    try {
      await idempotencyRelease.run(this.redis, [idem], claim.key, claim.claimId);
    } catch (err) {
      if (why instanceof OutcomeUnknownError) {
        this.logger.warn(
          `claim on an Idempotency-Key not given up after a lost answer (${(err as Error).message}); it lapses in ${this.claimTtlMs} ms`,
        );
      }
    }
  }
}

/** Of what a request asks: the same key with another body is a mismatch. */
function fingerprintOf(line: OrderLine): string {
  return createHash('sha256')
    .update(`${line.productId}\n${line.userId}\n${line.quantity}`)
    .digest('base64url')
    .slice(0, 22);
}
