import { Inject, Injectable } from '@nestjs/common';
import type { RedisClient } from '../redis/create-client';
import { AppConfig, strategyFamily } from '../config/app-config';
import { APP_CONFIG } from '../config/config.constants';
import {
  SaleHasOrdersError,
  SaleHasReservationsError,
  SaleNotSettledError,
  StrategyMismatchError,
  UnknownProductError,
} from '../errors/errors';
import { PurchasePath } from '../orders/purchases/purchase-path';
import { execAll } from '../redis/exec-all';
import { KeyLayout } from '../redis/key-layout';
import { resetSale } from '../redis/lua-scripts';
import { REDIS_CLIENT } from '../redis/redis.constants';
import { PurchaseTelemetry } from '../telemetry/purchase-telemetry';
import { Product } from './product';

@Injectable()
export class ProductsService {
  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly purchases: PurchasePath,
    private readonly keys: KeyLayout,
    private readonly telemetry: PurchaseTelemetry,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /**
   * Starts or restarts a sale: stock, limit, and empty buyers and order log, in one
   * script, run while no purchase of the product is between its read and its write
   * (under a lock, holding the product's lock, which the release then clears), so
   * that no purchase decided in the old sale lands in the new one. The dashboard's
   * counts of the old sale go too: the live hash in the script, this instance's
   * unpublished ones right before it, and other instances' when they publish them
   * (the new sale id the script returns tells them apart).
   * The orders of the current sale are discarded only when `discardOrders` says so
   * (else SaleHasOrdersError, nothing changed), and the sale records this instance's
   * strategy family: instances of another refuse to sell it (strategyFamily()), and to
   * restart it unless `switchStrategy` says so (else StrategyMismatchError).
   */
  async startSale(
    productId: string,
    stock: number,
    perUserLimit: number,
    options: { paymentTimeoutMs?: number; discardOrders?: boolean; switchStrategy?: boolean } = {},
  ): Promise<Product> {
    const k = this.keys.product(productId);
    const family = strategyFamily(this.config.lockStrategy);
    // The settler and the expiry sweeper find the product here: listed before its sale
    // starts, so no order of it is ever unlisted (a product listed without a sale is skipped).
    await this.redis.sadd(this.keys.products, productId);
    await this.purchases.exclusive(productId, async () => {
      const reply = await resetSale.run(
        this.redis,
        [k.meta, k.stock, k.buyers, k.orders, k.idem, k.live, k.states, k.deadlines],
        stock,
        perUserLimit,
        options.discardOrders ? '1' : '0',
        family,
        options.switchStrategy ? '1' : '0',
        options.paymentTimeoutMs ?? this.config.paymentTimeoutMs,
      );
      if (reply[0] === 'HAS_ORDERS') throw new SaleHasOrdersError(productId, reply[1]);
      if (reply[0] === 'NOT_SETTLED') throw new SaleNotSettledError(productId, reply[1]);
      if (reply[0] === 'HAS_RESERVATIONS') throw new SaleHasReservationsError(productId, reply[1]);
      if (reply[0] === 'STRATEGY_MISMATCH') throw new StrategyMismatchError(productId, reply[1], family);
      const value = reply[1];
      this.telemetry.saleRestarted(productId);
      this.telemetry.saleStarted(productId, value);
    });
    return this.get(productId);
  }

  async get(productId: string): Promise<Product> {
    const k = this.keys.product(productId);
    const [meta, stock, orders] = (await execAll(
      this.redis.multi().hmget(k.meta, 'initialStock', 'perUserLimit', 'paymentTimeoutMs').get(k.stock).hlen(k.states),
    )) as [(string | null)[], string | null, number];
    const [initialStock, perUserLimit, paymentTimeoutMs] = meta;
    if (initialStock === null || perUserLimit === null || stock === null) throw new UnknownProductError(productId);
    return {
      id: productId,
      initialStock: Number(initialStock),
      stock: Number(stock),
      sold: Number(initialStock) - Number(stock),
      orders,
      perUserLimit: Number(perUserLimit),
      paymentTimeoutMs: paymentTimeoutMs === null ? null : Number(paymentTimeoutMs),
    };
  }
}
