/**
 * A kind of measured sale (fastify/benchmarks' one file per scenario): what it adds to
 * a plain burst of buyers, hook by hook, in the order the measured sale calls them.
 * A row's sale is the plain one plus every kind its options switch on
 * (bench/measured-sale.ts): at most one of them runs the pass itself.
 */
import type { BucketFigures } from '../buckets';
import type { SettledOrder } from '../history/history';
import type { Answer, LoadOptions, LoadResult } from '../load';
import type { LoadProgress } from '../progress';
import type { QueueFigures } from '../queue-load';
import type { SettlementRow } from '../report';
import type { RowApp, Run } from '../rows';
import type { Opening } from '../starts-in';
import type { SaleSnapshot, Verdict } from '../verdict';

/** One measured sale (one attempt of a row), as its scenarios see it. */
export interface Sale {
  readonly run: Run;
  readonly t: RowApp;
  /** The products on sale; the first is the one a one-product kind acts on. */
  readonly ids: string[];
  readonly productId: string;
  /** Redis's clock less this machine's (ms): the sale's start and its orders are on Redis's. */
  readonly skewMs: number;
}

/** What the kinds found, for the row; each kind fills its own. */
export interface Figures {
  afterlife?: SettlementRow['afterlife'];
  settlement?: SettlementRow;
  opening?: Opening;
  queue?: QueueFigures;
  /** PostgreSQL's orders of each product settled, read once settlement drained: the history's total queue. */
  settled?: Record<string, readonly SettledOrder[]>;
  /** --buckets: the measured product's buckets and the moves between them. */
  buckets?: BucketFigures;
}

export interface Scenario {
  /** The payment deadline the sale's PUT sets (ms). */
  readonly paymentTimeoutMs?: number;
  /** More of the sale's PUT: its window, its waiting room, its buckets. */
  readonly put?: Record<string, unknown>;
  /** The pass's buyers, in sending order, instead of b0..bN (--skew). */
  readonly userIds?: readonly string[];
  /** Just before the measured pass, the sale set up. */
  begin?(): void;
  /** Each answer of the measured pass, as it arrives. */
  readonly onAnswer?: (answer: Answer) => void;
  /** The measured pass itself, instead of one burst of every buyer. */
  load?(options: LoadOptions, progress: LoadProgress, figures: Figures): Promise<LoadResult>;
  /** After the pass and its cost: the load the verdict judges, with what this kind sent after it. */
  after?(load: LoadResult, figures: Figures): Promise<LoadResult>;
  /** Its own promise, checked from Redis into the verdict (`sale`: the first product's). */
  judge?(verdict: Verdict, sale: SaleSnapshot, figures: Figures): Promise<void>;
}

/** A broken promise of a kind's, into the verdict: its invariant false, its line, its problem. */
export function broke(
  verdict: Verdict,
  invariant: keyof Verdict['invariants'],
  problem: string | null | undefined,
): void {
  verdict.invariants[invariant] = !problem;
  if (!problem) return;
  verdict.broken[invariant] = problem;
  verdict.problems.push(problem);
}
