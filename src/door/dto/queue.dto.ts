import { Matches } from 'class-validator';
import { ID_PATTERN, ID_RULE } from '../../sale/sale-limits';

/** Body of POST /api/products/:id/queue. */
export class JoinQueueDto {
  @Matches(ID_PATTERN, { message: `userId ${ID_RULE}` })
  readonly userId!: string;
}

/** The `:id` and `:ticket` of GET /api/products/:id/queue/:ticket. */
export class TicketParamsDto {
  @Matches(ID_PATTERN, { message: `id ${ID_RULE}` })
  readonly id!: string;

  @Matches(/^[A-Za-z0-9_-]{1,64}$/, { message: 'ticket must be a ticket as joining the queue answered it' })
  readonly ticket!: string;
}
