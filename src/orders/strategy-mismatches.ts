import { Injectable } from '@nestjs/common';

/** Most products /health names as refused for their strategy family. */
const MAX_NAMED = 16;

/**
 * The products this instance refused lately because another strategy family sells them
 * (STRATEGY_MISMATCH), for /health to name: during a rolling deploy between strategies,
 * the operator sees which sales this instance leaves to the others.
 */
@Injectable()
export class StrategyMismatches {
  /** In the order last seen (a Set keeps insertion order), the oldest first. */
  private readonly products = new Set<string>();

  saw(productId: string): void {
    this.products.delete(productId);
    this.products.add(productId);
    if (this.products.size > MAX_NAMED) this.products.delete(this.products.values().next().value!);
  }

  /** The latest first. */
  recent(): string[] {
    return [...this.products].reverse();
  }
}
