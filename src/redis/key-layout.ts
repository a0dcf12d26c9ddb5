/** The keys of one product's sale. */
export interface ProductKeys {
  /** String: units left. */
  readonly stock: string;
  /**
   * Hash: initialStock, perUserLimit, saleId, soldBy (the strategy family that started
   * the sale: strategyFamily()) and `fence`, the last fencing token applied. Its
   * presence is what makes a product known.
   */
  readonly meta: string;
  /** String: the lock's owner token, with a TTL. */
  readonly lock: string;
  /** String: fencing counter (used by fenced strategies). */
  readonly fence: string;
  /** Hash: userId -> units bought in this sale. */
  readonly buyers: string;
  /** Stream: one entry per order (orderId, userId, quantity). */
  readonly orders: string;
  /** Hash: Idempotency-Key -> its claim or its order's outcome (idempotency-claim-3.lua). */
  readonly idem: string;
  /** String, a second's life: the write REDIS_WAIT_REPLICAS's WAIT follows (src/orders/replica-acks.ts). */
  readonly replicated: string;
  /** Hash: the dashboard's answers per app instance and code in this sale (live-publish-2.lua); a sale restart deletes it. */
  readonly live: string;
  /** Hash: orderId -> its state (reserved, paid, cancelled, expired), userId and quantity (order-outcome-6.lua). */
  readonly states: string;
  /** Sorted set: each reserved order's payment deadline (ms, Redis's clock); the sweeper expires the due ones. */
  readonly deadlines: string;
  /**
   * Hash: the waiting room (queue-5.lua): `t:<ticket>` -> `<position>|<userId>|<pass>`,
   * `u:<userId>` -> ticket, `n:<position>` -> ticket, `x:<pass>` -> `<ticket>|<userId>|<expires at>`
   * once admitted, `y:<pass>` -> the units it bought, once its purchase wrote its order (a product of several buckets: pass-used-3.lua).
   */
  readonly queue: string;
  /** Sorted set: the passes issued and not yet used, by expiry (ms, Redis's clock). */
  readonly admitted: string;
  /** Hash: escrow moves out of this bucket still in flight, `o:<transfer id>` (move-out-4.lua). */
  readonly moves: string;
  /**
   * String, with a TTL: the token of an admin change (PUT, DELETE, close) of the product
   * under way (products.service.ts): one at a time, so a product's buckets are never left
   * in two sales. Bucket 0's only.
   */
  readonly admin: string;
  /** Hash: escrow moves this bucket has answered, `i:<transfer id>` (move-in-4.lua); kept for the product's life. */
  readonly landed: string;
  /**
   * Not a key, and not enumerable (Object.values() of a product's keys is its keys): the
   * scripts that write the order log take it (ARGV) to find the shard's marks
   * (includes/shard-marks.lua), the app's guess of the tag, '' for none.
   */
  readonly marksGuess: string;
}

/** One shard's work marks (includes/shard-marks.lua): what the settler and the sweeper read. */
export interface ShardMarkKeys {
  /** Sorted set: product id -> entries written to its order log (the settler's work). */
  readonly settle: string;
  /** Sorted set: reserved order id -> its payment deadline (ms, Redis's clock): the sweeper's work. */
  readonly due: string;
}

/** A product's key read back: `<prefix>{p:<productId>}:<part>` (KeyLayout.product()). */
const PRODUCT_KEY = /^(.*)\{p:([^}]*)\}:[a-z]+$/;

/** The product id in one of its keys, or null when the key is no product's. */
export function productIdOf(key: string): string | null {
  return PRODUCT_KEY.exec(key)?.[2] ?? null;
}

/**
 * All the keys of the product that `key` is one of, built by KeyLayout.product() like
 * every other product key: for a lock, which is given only its own key and needs the
 * ones that go with it (the fenced lock's counter and the meta hash that records the
 * last token applied).
 */
export function productKeysOf(key: string): ProductKeys {
  const parts = PRODUCT_KEY.exec(key);
  if (!parts) throw new Error(`not a product key: ${key}`);
  return new KeyLayout(parts[1]).product(parts[2]);
}

/**
 * Key layout: `<prefix>{p:<productId>}:<part>`. The hash tag `{p:<id>}` puts every
 * key of a product in one Redis Cluster slot, so multi-key scripts and MULTI/EXEC
 * over a product stay legal on a cluster. Every key the app writes starts with the
 * prefix, and the app only ever deletes keys under it.
 */
export class KeyLayout {
  /** `guess`: the shard marks' tag a product's scripts try first (src/redis/shard-marks.ts markGuess); none by default. */
  constructor(
    readonly prefix: string,
    private readonly guess: (productId: string) => string = () => '',
  ) {}

  /**
   * Set: every product listed, for the admin's catalog (GET /api/products) and the
   * audit; the loops never read it (they read the shard marks). One key, no hash tag.
   */
  get products(): string {
    return `${this.prefix}products`;
  }

  /**
   * String `1`, never removed: orders under this prefix are settled into PostgreSQL. Every
   * settler sets it as it starts (an app's, `npm run settle`), so an instance without
   * DATABASE_URL knows it too, and its sale resets keep the order log's consumer group
   * (reset-sale-10.lua). One key, no hash tag.
   */
  get settling(): string {
    return `${this.prefix}settling`;
  }

  product(productId: string): ProductKeys {
    const base = `${this.prefix}{p:${productId}}`;
    const keys = {
      stock: `${base}:stock`,
      meta: `${base}:meta`,
      lock: `${base}:lock`,
      fence: `${base}:fence`,
      buyers: `${base}:buyers`,
      orders: `${base}:orders`,
      idem: `${base}:idem`,
      replicated: `${base}:replicated`,
      live: `${base}:live`,
      states: `${base}:states`,
      deadlines: `${base}:deadlines`,
      queue: `${base}:queue`,
      admitted: `${base}:admitted`,
      moves: `${base}:moves`,
      admin: `${base}:admin`,
      landed: `${base}:landed`,
    } as Omit<ProductKeys, 'marksGuess'>;
    // Not enumerable: Object.values() of a product's keys stays its keys alone (a DEL of all of them).
    return Object.defineProperty(keys, 'marksGuess', {
      value: this.guess(productId),
      enumerable: false,
    }) as ProductKeys;
  }

  /** The work marks of the shard that serves `tag` (one of MARK_TAGS): `<prefix>{w:<tag>}:<part>`. */
  marks(tag: string): ShardMarkKeys {
    return { settle: `${this.prefix}{w:${tag}}:settle`, due: `${this.prefix}{w:${tag}}:due` };
  }
}
