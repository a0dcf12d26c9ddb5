import { Controller, Get, Inject, MessageEvent, Param, Res, Sse } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { Observable } from 'rxjs';
import { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.constants';
import { LiveParamsDto } from './dto/live-params.dto';
import { LiveFeed } from './live-feed';
import { LiveSales } from './live-sales';

@Controller('api/live')
export class LiveController {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly feed: LiveFeed,
    private readonly sales: LiveSales,
  ) {}

  /** The products this instance saw lately (bought or reset), the latest first: the page opens the first. */
  @Get()
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
   * begins (the pipe runs first; Nest sends no header until the first event).
   */
  @Sse(':productId')
  watch(@Param() params: LiveParamsDto, @Res({ passthrough: true }) reply: FastifyReply): Observable<MessageEvent> {
    return this.feed.watch(params.productId, reply.raw);
  }
}
