import { Matches } from 'class-validator';

/** What a payment id may look like: a provider's reference, 1-128 characters of A-Z a-z 0-9 _ - . : */
export const PAYMENT_ID_PATTERN = /^[A-Za-z0-9_.:-]{1,128}$/;

/** Body of POST /api/orders/:orderId/pay: the payment provider's callback, reduced to its reference. */
export class PayOrderDto {
  @Matches(PAYMENT_ID_PATTERN, { message: 'paymentId must be 1-128 characters of A-Z a-z 0-9 _ - . :' })
  readonly paymentId!: string;
}
