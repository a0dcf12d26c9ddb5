import { CanActivate, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { SecuritySchemeObject } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { PaymentSignatureInvalidError } from '../errors/errors';
import { AdminGuard } from './admin.guard';
import { DOOR_CONFIG, DoorConfig } from './door.config';

declare module 'fastify' {
  interface FastifyRequest {
    /** A JSON body as it was sent, before parsing (create-app.ts): what a signature covers. */
    rawBody?: string;
  }
}

/**
 * The header a payment provider's callback carries, Stripe's scheme:
 * `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<orderId>.<body as sent>">`, keyed with
 * PAYMENT_WEBHOOK_SECRET. The order is in the signed string: the body names only the
 * payment, and a callback for one order must not pay another. Several `v1` may be given
 * (a secret being rotated): one must hold.
 */
export const PAYMENT_SIGNATURE_HEADER = 'payment-signature';

/**
 * How far a signature's timestamp may be from this instance's clock, in seconds
 * (Stripe's default): a callback captured once cannot be replayed after it.
 */
export const PAYMENT_SIGNATURE_TOLERANCE_S = 300;

/** The OpenAPI security scheme of the payment callback (the document's `paymentSignature`). */
export const PAYMENT_SIGNATURE_SCHEME: SecuritySchemeObject = {
  type: 'apiKey',
  in: 'header',
  name: 'Payment-Signature',
  description: `the payment provider's signature of its callback: \`t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<orderId>.<body as sent>">\`, keyed with PAYMENT_WEBHOOK_SECRET, its timestamp within ${PAYMENT_SIGNATURE_TOLERANCE_S} s of the server's clock (Stripe's scheme)`,
};

function hmac(secret: string, at: number | string, orderId: string, body: string): Buffer {
  return createHmac('sha256', secret).update(`${at}.${orderId}.${body}`).digest();
}

/** The Payment-Signature a provider holding `secret` sends with `body` for `orderId`, signed at `at` (unix seconds). */
export function signPayment(secret: string, orderId: string, body: string, at = Math.floor(Date.now() / 1000)): string {
  return `t=${at},v1=${hmac(secret, at, orderId, body).toString('hex')}`;
}

/**
 * Why `header` does not sign `body` for `orderId` with `secret` at `nowS` (unix
 * seconds), or null when it does. Every comparison is constant-time; the timestamp is inside the MAC, so
 * it cannot be moved without the secret.
 */
export function paymentSignatureProblem(
  secret: string,
  header: string | undefined,
  orderId: string,
  body: string,
  nowS = Math.floor(Date.now() / 1000),
): string | null {
  if (!header) return 'the Payment-Signature header is missing';
  const parts = header.split(',').map((part) => part.trim().split('='));
  const at = parts.find(([k]) => k === 't')?.[1];
  const signatures = parts.filter(([k, v]) => k === 'v1' && /^[0-9a-f]{64}$/.test(v ?? '')).map(([, v]) => v);
  if (!at || !/^\d{1,12}$/.test(at) || signatures.length === 0) {
    return 'the Payment-Signature header is not t=<unix seconds>,v1=<64 hex digits>';
  }
  if (Math.abs(nowS - Number(at)) > PAYMENT_SIGNATURE_TOLERANCE_S) {
    return `its timestamp is more than ${PAYMENT_SIGNATURE_TOLERANCE_S} s from this server's clock`;
  }
  const expected = hmac(secret, at, orderId, body);
  const matches = signatures.some((v) => timingSafeEqual(Buffer.from(v, 'hex'), expected));
  return matches
    ? null
    : 'the signature does not match this order and body (another secret, another order, or the body was changed)';
}

/**
 * POST /api/orders/:orderId/pay: a payment is confirmed by the payment provider, never
 * by the buyer, so the route takes a callback signed with PAYMENT_WEBHOOK_SECRET
 * (paymentSignatureProblem), or the admin token (an operator marking a payment by
 * hand). Anything else is 401 PAYMENT_SIGNATURE_INVALID, saying why, and pays nothing.
 */
@Injectable()
export class PaymentGuard implements CanActivate {
  private readonly secret: string | null;

  constructor(
    @Inject(DOOR_CONFIG.token) config: DoorConfig,
    private readonly admin: AdminGuard,
  ) {
    this.secret = config.paymentWebhookSecret;
  }

  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<FastifyRequest>();
    if (request.headers.authorization !== undefined && this.admin.admits(request.headers.authorization)) return true;
    if (this.secret === null) {
      throw new PaymentSignatureInvalidError(
        'this instance has no PAYMENT_WEBHOOK_SECRET, so only the admin token may mark an order paid',
      );
    }
    const header = request.headers[PAYMENT_SIGNATURE_HEADER];
    const { orderId = '' } = request.params as { orderId?: string };
    const problem = paymentSignatureProblem(
      this.secret,
      Array.isArray(header) ? header.join(',') : header,
      orderId,
      request.rawBody ?? '',
    );
    if (problem) throw new PaymentSignatureInvalidError(problem);
    return true;
  }
}
