import { DEFAULT_PAYMENT_TIMEOUT_MS, MAX_PAYMENT_TIMEOUT_MS, MIN_PAYMENT_TIMEOUT_MS } from '../sale/sale-limits';
import { LOCKS_CONFIG } from '../locks/locks.config';
import { LESSONS_CONFIG } from '../settings/lessons.config';
import { ConfigOf, ConfigsOf, configView, int, section } from '../settings/setting';
import { STRATEGY_CONFIG } from '../settings/strategy.config';

export const ORDERS_CONFIG = section('orders', {
  paymentTimeoutMs: int(
    'PAYMENT_TIMEOUT_MS',
    DEFAULT_PAYMENT_TIMEOUT_MS,
    [MIN_PAYMENT_TIMEOUT_MS, MAX_PAYMENT_TIMEOUT_MS],
    "how long an order stays reserved waiting for its payment before it expires and its units go back to stock, unless the sale's PUT says `paymentTimeoutMs`",
  ),
  expirySweepMs: int(
    'EXPIRY_SWEEP_MS',
    500,
    [10, 60_000],
    'how often each instance expires the reservations whose deadline passed',
  ),
});
export type OrdersConfig = ConfigOf<typeof ORDERS_CONFIG>;

/** What a purchase path reads: the strategy (its family), the lock's wait, and the sale's clock. */
export const PURCHASE_CONFIG = configView('purchase', STRATEGY_CONFIG, LOCKS_CONFIG, LESSONS_CONFIG);
export type PurchaseConfig = ConfigsOf<typeof PURCHASE_CONFIG.sections>;
