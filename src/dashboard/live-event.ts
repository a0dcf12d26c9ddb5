/**
 * What GET /api/live/:productId sends, about four times a second: the page and the
 * browser test read these names.
 */
export interface LiveEvent {
  /** When it was read, ms since the epoch (this instance's clock). */
  readonly at: number;
  readonly productId: string;
  readonly strategy: string;
  /** false with TELEMETRY=0: no instance publishes its answers, so `instances` stays empty. */
  readonly telemetry: boolean;
  /**
   * The sale's id (the meta hash's `saleId`, one more at each restart), so that a reader
   * tells a restarted sale from one whose units came back; null without a sale.
   */
  readonly saleId: number | null;
  /** null when the product has no sale. */
  readonly initialStock: number | null;
  readonly perUserLimit: number | null;
  /**
   * Units left, from Redis; below 0 when an unsafe strategy oversold. For a product in
   * several escrow buckets, initialStock, stock and orders are their sums, units moving
   * between buckets counted in stock (as GET /api/products/:id counts them).
   */
  readonly stock: number | null;
  /**
   * initialStock - stock: the units held by orders (reserved or paid), as Redis says. A
   * cancel or an expiry gives its units back to stock, so this goes down with it.
   */
  readonly sold: number | null;
  /** The sale's orders and what became of them, as Redis holds them; null without a sale. */
  readonly orders: LiveOrders | null;
  /**
   * The escrow buckets the stock is kept in (src/sale/buckets.ts), bucket 0 first: one for
   * a product sold from one shard (its own figures); null without a sale.
   */
  readonly buckets: readonly LiveBucket[] | null;
  /** The product's lock as its key in the sale's Redis says, or null when that key is free (or elsewhere: see lockNote). */
  readonly lock: LiveLock | null;
  /** Why `lock` shows less than a pid, when it does: a lock-free strategy, Redlock's own nodes, an owner id without a pid. */
  readonly lockNote: string | null;
  readonly instances: readonly LiveInstance[];
  /**
   * The sale window and Redis's clock when it was read (ms since the epoch), for the
   * countdown: the page counts from Redis's clock, never the viewer's. null without a sale.
   */
  readonly window: {
    readonly startsAt: number | null;
    readonly endsAt: number | null;
    readonly redisNow: number;
  } | null;
  /** With DATABASE_URL: the product's order stream entries (every bucket's) not settled into PostgreSQL yet, and the oldest one's age (ms). */
  readonly settlement?: { readonly unsettled: number; readonly oldestMs: number };
}

/** One escrow bucket, as GET /api/products/:id/buckets (admin) shows it, less its slot. */
export interface LiveBucket {
  /** The product's id for bucket 0, `<id>~<n>` for the others. */
  readonly id: string;
  /** Its share of the sale's stock at the start. */
  readonly initialStock: number;
  /** Units it holds the rights to now. */
  readonly stock: number;
  /** Orders it wrote (its order states hash's length). */
  readonly orders: number;
  /** Units it gave up to another bucket that have not landed there yet. */
  readonly inFlight: number;
  /** Its lock, read as the product's `lock` is (each bucket has its own): null when free or not read (see lockNote). */
  readonly lock: LiveLock | null;
}

/** A lock as its key says: the holder's pid where the value names one, and PTTL (-1: a key without a TTL). */
export interface LiveLock {
  readonly holderPid: number | null;
  readonly ttlMs: number;
}

/**
 * A sale's orders by state, read from Redis in bounded steps (a hash's length, a sorted
 * set's size, a few fields of the meta hash), never by reading the orders themselves.
 */
export interface LiveOrders {
  /** Orders the sale wrote, whatever became of them since: the order states hash's length. */
  readonly written: number;
  /**
   * Those still reserved (neither paid, cancelled nor expired yet): the deadlines sorted
   * set's size, where each reservation waits for its payment until it leaves that state.
   * null for a sale without a payment deadline (started before reservations).
   */
  readonly reserved: number | null;
  /** written - reserved - cancelled - expired; null where any of those is. */
  readonly paid: number | null;
  /**
   * Orders cancelled, orders expired, and the units both gave back to stock: counted by
   * the script that returns the units, in the meta hash (ordersCancelled, ordersExpired,
   * unitsReturned), from the sale's start; null for a sale whose Redis keeps no count.
   */
  readonly cancelled: number | null;
  readonly expired: number | null;
  readonly unitsReturned: number | null;
}

/** The meta hash's fields a LiveOrders is read from, in the order liveOrders() takes them. */
export const LIVE_ORDERS_META = ['paymentTimeoutMs', 'ordersCancelled', 'ordersExpired', 'unitsReturned'] as const;

/** A sale's LiveOrders from its states hash's length, its deadlines' size and LIVE_ORDERS_META's values. */
export function liveOrders(written: number, deadlines: number, meta: readonly (string | null)[]): LiveOrders {
  const [timeout, ...counted] = meta;
  const reserved = timeout === null ? null : deadlines;
  const [cancelled, expired, unitsReturned] = counted.map((v) => (v === null ? null : Number(v)));
  const paid =
    reserved === null || cancelled === null || expired === null ? null : written - reserved - cancelled - expired;
  return { written, reserved, paid, cancelled, expired, unitsReturned };
}

/** Several buckets' orders as one sale's: each count summed, null where any bucket's is. */
export function sumOrders(all: readonly LiveOrders[]): LiveOrders {
  const total = (key: keyof LiveOrders) =>
    all.some((o) => o[key] === null) ? null : all.reduce((sum, o) => sum + o[key]!, 0);
  return {
    written: total('written')!,
    reserved: total('reserved'),
    paid: total('paid'),
    cancelled: total('cancelled'),
    expired: total('expired'),
    unitsReturned: total('unitsReturned'),
  };
}

/**
 * How long an instance with buyers waiting may go unseen before its waiting buyers
 * stop counting: it publishes every 250 ms while any wait (its heartbeat), so 2 s is
 * eight missed ticks. Long enough that a busy event loop, a slow Redis round trip or
 * a second of clock skew between instances (`seen` is the publisher's clock, the
 * age the reader's) does not flicker a live instance to "gone"; short enough that a
 * crashed one's buyers leave the total within a couple of seconds, not 24 hours.
 */
export const STALE_AFTER_MS = 2_000;

/** One app instance's share of a sale, as it published it (live-publish-2.lua). */
export interface LiveInstance {
  /** `<hostname>/<pid>`. */
  readonly id: string;
  readonly pid: number;
  /**
   * Answers in this sale by code: CREATED for a 201 that wrote an order, REPLAYED for a
   * 201 that answered again an order written before (the same key or pass), else the
   * error code.
   */
  readonly answers: Readonly<Record<string, number>>;
  /**
   * Buyers that had arrived in that instance and were not answered, at its last
   * publish; 0 when the instance is stale.
   */
  readonly waiting: number;
  /**
   * It said buyers were waiting and has not published for over STALE_AFTER_MS
   * (crashed, or cut off from Redis): they are not counted. Its answers still are
   * (they happened). An idle instance publishes nothing and is never stale.
   */
  readonly stale: boolean;
  /** Holds that instance found lost (all products), at its last publish. */
  readonly lostLocks: number;
  /** How long ago it last published (it publishes only when something changed). */
  readonly seenMsAgo: number;
}

/** The instance's own fields in the live hash, beside its answer counts `<instance>|<CODE>`. */
const OWN_FIELDS = new Set(['pid', 'waiting', 'lostLocks', 'seen']);

/** The live hash (`<instance>|<field>` -> value) as one entry per instance, sorted by id. */
export function readInstances(hash: Record<string, string>, at: number): LiveInstance[] {
  const byId = new Map<
    string,
    { pid: number; answers: Record<string, number>; waiting: number; lostLocks: number; seen: number }
  >();
  for (const [field, value] of Object.entries(hash)) {
    // The instance id holds a '/', never a '|'; a code is upper-snake.
    const cut = field.lastIndexOf('|');
    if (cut <= 0) continue;
    const id = field.slice(0, cut);
    const name = field.slice(cut + 1);
    let entry = byId.get(id);
    if (!entry) {
      entry = { pid: 0, answers: {}, waiting: 0, lostLocks: 0, seen: 0 };
      byId.set(id, entry);
    }
    const n = Number(value);
    if (!OWN_FIELDS.has(name)) entry.answers[name] = n;
    else if (name === 'pid') entry.pid = n;
    else if (name === 'waiting') entry.waiting = n;
    else if (name === 'lostLocks') entry.lostLocks = n;
    else entry.seen = n;
  }
  return [...byId]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([id, e]) => {
      const seenMsAgo = Math.max(0, at - e.seen);
      const stale = e.waiting > 0 && seenMsAgo > STALE_AFTER_MS;
      return {
        id,
        pid: e.pid,
        answers: e.answers,
        waiting: stale ? 0 : e.waiting,
        stale,
        lostLocks: e.lostLocks,
        seenMsAgo,
      };
    });
}

/** The pid in a lock token `<pid>:<random>` (lock, fenced, and the token classic mistakes), or null. */
export function holderPid(value: string | null): number | null {
  const match = value === null ? null : /^(\d+):/.exec(value);
  return match ? Number(match[1]) : null;
}
