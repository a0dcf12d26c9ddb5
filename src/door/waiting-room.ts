import { Inject, Injectable } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import {
  AdmissionInvalidError,
  NoQueueError,
  retryAfterSeconds,
  SoldOutError,
  UnknownProductError,
  UnknownTicketError,
} from '../errors/errors';
import type { RedisClient } from '../redis/create-client';
import { execAll } from '../redis/exec-all';
import { KeyLayout } from '../redis/key-layout';
import { queue, queueKeys } from '../redis/lua-scripts';
import { REDIS_CLIENT } from '../redis/redis.constants';

/** Tickets and passes: 128 random bits, base64url. */
const TOKEN = /^[A-Za-z0-9_-]{22}$/;

/** Whether a header value can be a pass at all (checked before it is used as a key in Redis). */
export function passShaped(value: string): boolean {
  return TOKEN.test(value);
}

/** A ticket as GET /api/products/:id/queue/:ticket answers it. */
export interface TicketState {
  readonly ticket: string;
  readonly state: 'waiting' | 'admitted' | 'used' | 'expired' | 'sold_out';
  /** While waiting: 1 = admitted next. 0 once admitted. */
  readonly position: number;
  /** While admitted: the single-use pass to send as Admission-Pass, and when it lapses (ISO 8601). */
  readonly pass?: string;
  readonly passExpiresAt?: string;
  /** While waiting: seconds until the position is likely admitted (the Retry-After hint). */
  readonly retryAfterS?: number;
}

const newToken = (): string => randomBytes(16).toString('base64url');

/**
 * A product's waiting room (PUT `queue: {admitPerSecond, passTtlMs}`): buyers join a
 * FIFO queue and are admitted at the sale's rate, each with a pass that buys once.
 * Everything lives in Redis beside the sale (queue-5.lua), under the product's hash
 * tag: any instance serves any buyer, a crash loses no place, and it works on a
 * cluster. The pass is consumed by the purchase it makes: the purchase claims the
 * Idempotency-Key `pass <pass>` and its write turns the claim into the order's
 * outcome in the same atomic step, so one pass makes one order, and a retry with the
 * pass is answered that order.
 */
@Injectable()
export class WaitingRoom {
  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly keys: KeyLayout,
  ) {}

  /** Joins `userId` to the queue (or finds the ticket they have). */
  async join(productId: string, userId: string): Promise<TicketState> {
    const k = this.keys.product(productId);
    return this.answer(productId, await queue.run(this.redis, queueKeys(k), 'join', userId, newToken(), newToken()));
  }

  /**
   * The ticket's state. With BUYER_AUTH, `buyer` is the token's `sub`: another buyer's
   * ticket is no ticket of theirs (its pass is the owner's alone).
   */
  async read(productId: string, ticket: string, buyer: string | null = null): Promise<TicketState> {
    if (!TOKEN.test(ticket)) throw new UnknownTicketError(productId);
    const k = this.keys.product(productId);
    const reply = await queue.run(this.redis, queueKeys(k), 'read', ticket);
    if (buyer !== null && reply[6] !== undefined && reply[6] !== buyer) throw new UnknownTicketError(productId);
    return this.answer(productId, reply);
  }

  /**
   * Throws AdmissionInvalidError unless `pass` is a pass this product's queue issued to
   * `userId` and has not lapsed by Redis's clock. Called once the purchase holds the
   * pass's claim, so no other request can use it meanwhile. Returns when it lapses
   * (ms): the write checks that again by Redis's clock, so a purchase that waited for
   * the lock past it buys nothing.
   */
  async check(productId: string, userId: string, pass: string): Promise<number> {
    if (!TOKEN.test(pass)) throw new AdmissionInvalidError('is not a pass this sale issued');
    const k = this.keys.product(productId);
    const [record, time] = (await execAll(this.redis.multi().hget(k.queue, `x:${pass}`).time())) as [
      string | null,
      [string, string],
    ];
    const [, owner, expires] = record?.split('|') ?? [];
    if (record === null || owner === undefined) throw new AdmissionInvalidError('is not a pass this sale issued');
    if (owner !== userId) throw new AdmissionInvalidError("is another buyer's");
    const now = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
    if (now >= Number(expires)) throw new AdmissionInvalidError('has expired');
    return Number(expires);
  }

  /** Once its order is written, the pass no longer holds units back (best effort: else it does until it lapses). */
  async used(productId: string, pass: string): Promise<void> {
    await this.redis.zrem(this.keys.product(productId).admitted, pass).catch(() => undefined);
  }

  private answer(productId: string, reply: Awaited<ReturnType<typeof queue.run>>): TicketState {
    const [state, ticket, position, pass, expires, rate] = reply;
    if (state === 'UNKNOWN_PRODUCT') throw new UnknownProductError(productId);
    if (state === 'NO_QUEUE') throw new NoQueueError(productId);
    if (state === 'UNKNOWN_TICKET') throw new UnknownTicketError(productId);
    if (state === 'SOLD_OUT') throw new SoldOutError(productId);
    const base = { ticket: ticket!, state: state as TicketState['state'], position: position! };
    if (state === 'admitted') return { ...base, pass, passExpiresAt: new Date(expires!).toISOString() };
    if (state === 'waiting') return { ...base, retryAfterS: retryAfterSeconds((position! * 1000) / rate!) };
    return base;
  }
}
