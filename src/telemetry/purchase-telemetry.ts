import { Injectable } from '@nestjs/common';

/**
 * One purchase's life as the telemetry sees it. `code` is `CREATED` for a 201 that
 * wrote an order, `REPLAYED` for a 201 that answered again with an order written
 * before (a retry with its Idempotency-Key or Admission-Pass), and the error code
 * otherwise (SOLD_OUT, LOCK_TIMEOUT, ...). A listener never sees a user id: labels and
 * aggregates are per product and code.
 */
export interface PurchaseListener {
  /** A buyer's request reached the purchase route (it waits in this instance from now). */
  arrived(productId: string): void;
  /** That buyer was answered. Called exactly once per `arrived`. */
  answered(productId: string, code: string): void;
  /** An admin is restarting the product's sale (under its lock, right before the reset script): what was counted belongs to the old sale. */
  saleRestarted?(productId: string): void;
  /** The reset script answered with the new sale's id (meta `saleId`). */
  saleStarted?(productId: string, saleId: number): void;
}

/**
 * The one hook the purchase route (and the sale reset) calls: it fans each event out to the listeners that
 * registered (the Prometheus counters, the dashboard's aggregate). With TELEMETRY=0
 * none registers and each call is a loop over nothing.
 */
@Injectable()
export class PurchaseTelemetry {
  private listeners: readonly PurchaseListener[] = [];

  listen(listener: PurchaseListener): void {
    this.listeners = [...this.listeners, listener];
  }

  arrived(productId: string): void {
    for (const l of this.listeners) l.arrived(productId);
  }

  answered(productId: string, code: string): void {
    for (const l of this.listeners) l.answered(productId, code);
  }

  saleRestarted(productId: string): void {
    for (const l of this.listeners) l.saleRestarted?.(productId);
  }

  saleStarted(productId: string, saleId: number): void {
    for (const l of this.listeners) l.saleStarted?.(productId, saleId);
  }
}

/** The code `answered` gets for a 201 that wrote an order (every refusal's is its error code). */
export const CREATED = 'CREATED';

/**
 * The code `answered` gets for a 201 that wrote nothing: the replay of an order a
 * request with the same key (or pass) wrote before (`Idempotent-Replayed: true`). A
 * code of its own, not a label beside CREATED: a query of `code="CREATED"` would match
 * a series with one more label too, and CREATED would count an order once per retry.
 * Every answer is still counted once, so the sum over codes is the purchases answered.
 */
export const REPLAYED = 'REPLAYED';
