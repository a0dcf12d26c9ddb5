import { IsBoolean, IsInt, Matches, Max, Min } from 'class-validator';
import {
  INSTANT_PATTERN,
  INSTANT_RULE,
  MAX_ADMIT_PER_SECOND,
  MAX_PASS_TTL_MS,
  MAX_PAYMENT_TIMEOUT_MS,
  MAX_PER_USER_LIMIT,
  MAX_STOCK,
  MIN_PASS_TTL_MS,
  MIN_PAYMENT_TIMEOUT_MS,
} from '../../sale/sale-limits';
import { MAX_BUCKETS } from '../../sale/buckets';
import { Nested } from '../../validation/json-schema';
import { Omittable } from '../../validation/omittable';

/** A sale's waiting room: buyers join a queue and are admitted in order, each with a single-use pass. */
export class QueueSettingsDto {
  /** Buyers admitted per second (each admission issues one pass). */
  @Max(MAX_ADMIT_PER_SECOND)
  @Min(1)
  @IsInt()
  readonly admitPerSecond!: number;

  /** How long an unused pass stays valid, in ms; then the next in line takes its place. */
  @Omittable()
  @Max(MAX_PASS_TTL_MS)
  @Min(MIN_PASS_TTL_MS)
  @IsInt()
  readonly passTtlMs?: number;
}

/** Body of PUT /api/products/:id. */
export class StartSaleDto {
  @Max(MAX_STOCK)
  @Min(0)
  @IsInt()
  readonly stock!: number;

  /** Units one user may buy in this sale. Omitted means 1; null is refused, not defaulted. */
  @Omittable()
  // Decorators run bottom-up and only the first failure is reported: type first.
  @Max(MAX_PER_USER_LIMIT)
  @Min(1)
  @IsInt()
  readonly perUserLimit: number = 1;

  /**
   * How long an order of this sale stays reserved waiting for its payment before it
   * expires and its units go back to stock, in ms. Omitted means PAYMENT_TIMEOUT_MS.
   */
  @Omittable()
  @Max(MAX_PAYMENT_TIMEOUT_MS)
  @Min(MIN_PAYMENT_TIMEOUT_MS)
  @IsInt()
  readonly paymentTimeoutMs?: number;

  /** When the sale opens (Redis's clock decides); omitted: at once. */
  @Omittable()
  @Matches(INSTANT_PATTERN, { message: `startsAt ${INSTANT_RULE}` })
  readonly startsAt?: string;

  /** When the sale closes (after startsAt); omitted: never. */
  @Omittable()
  @Matches(INSTANT_PATTERN, { message: `endsAt ${INSTANT_RULE}` })
  readonly endsAt?: string;

  /**
   * Escrow buckets (docs/scaling.md "One product on several shards"): the stock is split
   * into this many buckets on distinct hash tags (on a cluster, distinct masters), so as
   * many shards sell the product. Fixed for the product's life (another value: 409
   * BUCKETS_FIXED); omitted: as it is, 1 for a new product. A `queue` admits over all of them.
   */
  @Omittable()
  @Max(MAX_BUCKETS)
  @Min(1)
  @IsInt()
  readonly buckets?: number;

  /** A waiting room in front of the sale; omitted: none, buyers buy directly. */
  @Omittable()
  @Nested(QueueSettingsDto)
  readonly queue?: QueueSettingsDto;

  /**
   * A new sale discards the current one's orders (its order log, the only record of
   * them): while there are any, the PUT is refused 409 SALE_HAS_ORDERS unless this is true.
   */
  @Omittable()
  @IsBoolean()
  readonly discardOrders: boolean = false;

  /**
   * A sale another strategy family sells (a rolling deploy between strategies) is
   * restarted from this instance only when this is true: its reset cannot exclude the
   * other family's buyers, so it is for once no instance of that family serves it.
   * Otherwise 503 STRATEGY_MISMATCH, nothing changed.
   */
  @Omittable()
  @IsBoolean()
  readonly switchStrategy: boolean = false;
}
