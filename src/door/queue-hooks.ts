import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SaleEndedError, SoldOutError } from '../errors/errors';
import { ID_PATTERN } from '../sale/sale-limits';
import type { JoinQueueDto } from './dto/queue.dto';
import { TICKET_PARAM_PATTERN } from './dto/queue.dto';
import type { DoorRefusals } from './door-refusals';
import type { TicketState, WaitingRoom } from './waiting-room';
import { answerInHooks, HookFailure } from './route-hooks';

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * A waiting-room request that its hook tried and Redis refused (or failed): the
     * route (WaitingRoomController) throws it, so Nest's filter answers it as any
     * refusal, and nothing is asked of Redis twice.
     */
    queueFailure?: HookFailure;
  }
}

/** The waiting room's routes as Fastify declares them (Nest's `:id` and `:ticket`). */
const JOIN = '/api/products/:id/queue';
const READ = '/api/products/:id/queue/:ticket';

/**
 * A queue's herd is its busiest traffic: every buyer joins, and every buyer still
 * waiting reads its ticket while the next joins arrive. So the two routes are answered
 * from a hook (answerInHooks: Fastify and one Redis script, not Nest's pipeline too).
 * That matters beyond the joins themselves: while the app's event loop is full of
 * joins, each round trip of an admitted buyer's purchase waits a whole turn of it, so
 * the cheaper a join, the sooner the stock is sold and the door answers the rest for
 * next to nothing.
 *
 * Only the answers themselves are given here (a ticket, 202 or 200). Anything else goes
 * on to the route unchanged: a body or a parameter the schema refused (the pipe answers
 * 400 as on every route), and a refusal or failure of Redis's, which the route throws so
 * that Nest's filter answers it (its code, its Retry-After, its metrics and logs).
 *
 * Called before app.init(), and after installDoorChecks(), whose hooks must run first.
 */
export function answerQueueInHooks(fastify: FastifyInstance, room: WaitingRoom, door: DoorRefusals): void {
  const join = async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.validationError !== undefined) return;
    const { id } = request.params as { id: string };
    if (!ID_PATTERN.test(id)) return;
    try {
      const state = await joinQueue(room, door, id, (request.body as JoinQueueDto).userId);
      return reply.code(202).send(answered(state, reply));
    } catch (err) {
      request.queueFailure = { error: err };
    }
  };
  const read = async (request: FastifyRequest, reply: FastifyReply) => {
    const { id, ticket: value } = request.params as { id: string; ticket: string };
    if (!ID_PATTERN.test(id) || !TICKET_PARAM_PATTERN.test(value)) return;
    try {
      // With BUYER_AUTH: only the ticket's own buyer reads it (its pass is theirs alone).
      const state = await room.read(id, value, request.buyer);
      return reply.code(200).send(answered(state, reply));
    } catch (err) {
      request.queueFailure = { error: err };
    }
  };
  // Declared on every request, so the hook's note does not change the request's shape.
  fastify.decorateRequest('queueFailure', undefined);
  answerInHooks(fastify, "the waiting room's", { [`POST ${JOIN}`]: join, [`GET ${READ}`]: read });
}

/** A join, by the hook and by the route alike; a sell-out it is told is the door's to repeat for a while. */
export async function joinQueue(
  room: WaitingRoom,
  door: DoorRefusals,
  id: string,
  userId: string,
): Promise<TicketState> {
  try {
    return await room.join(id, userId);
  } catch (err) {
    if (err instanceof SoldOutError || err instanceof SaleEndedError) door.learnJoin(id, err);
    throw err;
  }
}

/** The ticket as the body, its wait as Retry-After: by the hooks and by the routes alike. */
export function answered(ticket: TicketState, reply: FastifyReply): Omit<TicketState, 'retryAfterS'> {
  const { retryAfterS, ...body } = ticket;
  if (retryAfterS !== undefined) void reply.header('Retry-After', String(retryAfterS));
  return body;
}
