/** A waiting-room ticket (waiting-room.ts's TicketState, without its Retry-After) as the API answers it. */
export const TICKET_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['ticket', 'state', 'position'],
  properties: {
    ticket: { type: 'string', description: 'your place in the queue; read it with GET .../queue/:ticket' },
    state: {
      type: 'string',
      enum: ['waiting', 'admitted', 'used', 'expired', 'sold_out', 'ended'],
      description:
        "waiting: not admitted yet; admitted: buy with `pass`; used: the pass bought; expired: the pass lapsed unused; sold_out: nothing left to admit for; ended: the sale's end (endsAt) has passed",
    },
    position: { type: 'integer', description: 'while waiting, your place in line (1 = next); 0 once admitted' },
    pass: { type: 'string', description: 'while admitted: send it as the Admission-Pass header; it buys once' },
    passExpiresAt: { type: 'string', description: 'while admitted: when the pass lapses (ISO 8601)' },
  },
} as const;
