import { Matches } from 'class-validator';
import { ID_PATTERN, ID_RULE } from '../../sale/sale-limits';

/** Body of POST /api/products/:id/queue. */
export class JoinQueueDto {
  @Matches(ID_PATTERN, { message: `userId ${ID_RULE}` })
  readonly userId!: string;
}

/** What a ticket in a URL may look like (tickets are 22 of these characters: waiting-room.ts). */
export const TICKET_PARAM_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** The `:id` and `:ticket` of GET /api/products/:id/queue/:ticket. */
export class TicketParamsDto {
  @Matches(ID_PATTERN, { message: `id ${ID_RULE}` })
  readonly id!: string;

  @Matches(TICKET_PARAM_PATTERN, { message: 'ticket must be a ticket as joining the queue answered it' })
  readonly ticket!: string;
}
