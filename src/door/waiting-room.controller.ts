import { Body, Controller, Get, HttpCode, Param, Post, Req, Res } from '@nestjs/common';
import { ApiAcceptedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { RouteSchema } from '@nestjs/platform-fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { bodySchemaOf } from '../validation/json-schema';
import { ApiErrors } from '../docs/api-errors';
import { DOOR_ERRORS } from './door-routes';
import { component } from '../docs/components';
import { ApiJsonBody, ApiPathParams } from '../docs/dto-decorators';
import { ProductParamsDto } from '../sale/product-params.dto';
import { JoinQueueDto, TicketParamsDto } from './dto/queue.dto';
import { TICKET_SCHEMA } from './ticket.schema';
import { DoorRefusals } from './door-refusals';
import { TicketState, WaitingRoom } from './waiting-room';
import { answered, joinQueue } from './queue-hooks';

const TICKET = component('Ticket', TICKET_SCHEMA);

@ApiTags('queue')
@Controller('api/products')
export class WaitingRoomController {
  constructor(
    private readonly room: WaitingRoom,
    private readonly door: DoorRefusals,
  ) {}

  @Post(':id/queue')
  @HttpCode(202)
  // The body checked by its compiled schema before the door's per-user limit counts it
  // (door-checks.ts): a body the schema refuses counts for no one.
  @RouteSchema({ body: bodySchemaOf(JoinQueueDto) })
  @ApiOperation({
    summary: "join a product's waiting room",
    description:
      'answers your ticket and your place in line (1 = admitted next); joining again answers the same ticket. Read the ticket until it is admitted, then buy with its pass as the Admission-Pass header. Once nothing is left, a buyer with no ticket is refused SOLD_OUT and not enrolled; once the sale ends (endsAt), SALE_ENDED. For a while after either, the door answers every join so before the body is read, the joins of ticket holders too (read your ticket instead).',
  })
  @ApiPathParams(ProductParamsDto)
  @ApiJsonBody(JoinQueueDto)
  @ApiAcceptedResponse({ description: 'your ticket', schema: TICKET })
  @ApiErrors(
    ...DOOR_ERRORS,
    'VALIDATION_FAILED',
    'URI_TOO_LONG',
    'PAYLOAD_TOO_LARGE',
    'UNSUPPORTED_MEDIA_TYPE',
    'UNKNOWN_PRODUCT',
    'NO_QUEUE',
    'SOLD_OUT',
    'SALE_ENDED',
    'REDIS_UNAVAILABLE',
  )
  async join(
    @Param() params: ProductParamsDto,
    @Body() body: JoinQueueDto,
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<Omit<TicketState, 'retryAfterS'>> {
    // Tried by its hook already (queue-hooks.ts), which answers a ticket itself: what
    // comes here is what Redis refused, for Nest's filter to answer.
    if (request.queueFailure !== undefined) throw request.queueFailure.error;
    return answered(await joinQueue(this.room, this.door, params.id, body.userId), reply);
  }

  @Get(':id/queue/:ticket')
  @ApiOperation({
    summary: 'read a ticket: waiting (with its place), admitted (with its pass), used, expired, sold_out or ended',
    description: 'while waiting, Retry-After says when to read it again',
  })
  @ApiPathParams(TicketParamsDto)
  @ApiOkResponse({
    description: 'the ticket',
    schema: TICKET,
    headers: {
      'Retry-After': {
        description: 'while waiting: seconds until this place is likely admitted',
        schema: { type: 'integer' },
      },
    },
  })
  @ApiErrors(
    // No body: nothing to mismatch.
    ...DOOR_ERRORS.filter((code) => code !== 'USER_MISMATCH'),
    'VALIDATION_FAILED',
    'URI_TOO_LONG',
    'UNKNOWN_PRODUCT',
    'NO_QUEUE',
    'UNKNOWN_TICKET',
    'REDIS_UNAVAILABLE',
  )
  async read(
    @Param() params: TicketParamsDto,
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<Omit<TicketState, 'retryAfterS'>> {
    if (request.queueFailure !== undefined) throw request.queueFailure.error;
    // With BUYER_AUTH: only the ticket's own buyer reads it (its pass is theirs alone).
    return answered(await this.room.read(params.id, params.ticket, request.buyer), reply);
  }
}
