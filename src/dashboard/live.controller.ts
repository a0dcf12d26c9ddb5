import { Controller, Get, Inject, MessageEvent, Param, Req, Res, Sse } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiOperation, ApiProduces, ApiResponse, ApiTags } from '@nestjs/swagger';
import { Observable } from 'rxjs';
import { ApiErrors } from '../docs/api-errors';
import { component } from '../docs/components';
import { ApiPathParams } from '../docs/dto-decorators';
import { ConfigsOf } from '../settings/setting';
import { LiveParamsDto } from './dto/live-params.dto';
import { LIVE_CONFIG, LiveFeed } from './live-feed';
import { LiveSales } from './live-sales';
import { LIVE_PRODUCTS_SCHEMA } from './live.schema';

const LIVE_PRODUCTS = component('LiveProducts', LIVE_PRODUCTS_SCHEMA);

@ApiTags('dashboard')
@Controller('api/live')
export class LiveController {
  constructor(
    @Inject(LIVE_CONFIG.token) private readonly config: ConfigsOf<typeof LIVE_CONFIG.sections>,
    private readonly feed: LiveFeed,
    private readonly sales: LiveSales,
  ) {}

  /** The products this instance saw lately (bought or reset), the latest first: the page opens the first. */
  @Get()
  @ApiOperation({ summary: 'the products this instance saw lately (bought or reset), the latest first' })
  @ApiResponse({ status: 200, description: 'this instance and the products it saw lately', schema: LIVE_PRODUCTS })
  products() {
    return {
      instance: this.sales.instance,
      strategy: this.config.lockStrategy,
      telemetry: this.config.telemetry,
      products: this.sales.recent(),
    };
  }

  /**
   * Server-Sent Events: one LiveEvent (live-event.ts) about four times a second, the
   * first at once. A bad id is refused 400 VALIDATION_FAILED as JSON before any stream
   * begins (the pipe runs first; Nest sends no header until the first event); past
   * the instance's bounds on streams, or the client's own, 503 TOO_MANY_WATCHERS the
   * same way. A stream ends after 10 minutes (1 without a sale): EventSource reconnects.
   */
  @Sse(':productId')
  @ApiOperation({ summary: "a product's sale, live: Server-Sent Events, one about every 250 ms, the first at once" })
  @ApiPathParams(LiveParamsDto)
  @ApiErrors('VALIDATION_FAILED', 'URI_TOO_LONG', 'TOO_MANY_WATCHERS')
  @ApiProduces('text/event-stream')
  @ApiResponse({
    status: 200,
    description:
      "each event's `data` is a JSON `{at, productId, strategy, telemetry, saleId, initialStock, perUserLimit, stock, sold, orders, lock, lockNote, instances, window, settlement?}` (`sold`: units held, initial stock minus stock; `orders: {written, reserved, paid, cancelled, expired, unitsReturned}`, null without a sale, a count Redis does not keep null; `window: {startsAt, endsAt, redisNow}`, ms on Redis's clock, null without a sale; `settlement: {unsettled, oldestMs}` with DATABASE_URL); the stream ends when the app starts closing, and after 10 minutes (1 minute for a product without a sale)",
    schema: { type: 'string' },
  })
  watch(
    @Param() params: LiveParamsDto,
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Observable<MessageEvent> {
    return this.feed.watch(params.productId, reply.raw, request.ip);
  }
}
