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
  private readonly products = new Map<string, number>();

  saw(productId: string, now = Date.now()): void {
    this.products.delete(productId);
    this.products.set(productId, now);
    if (this.products.size > MAX_NAMED) this.products.delete(this.products.keys().next().value!);
  }

  /** The latest first. */
  recent(): string[] {
    return [...this.products.keys()].reverse();
  }
}
