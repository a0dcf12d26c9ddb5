import { Controller, Get, Res } from '@nestjs/common';
import { ApiOperation, ApiProduces, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Metrics } from './metrics';

@ApiTags('metrics')
@Controller('metrics')
export class MetricsController {
  constructor(private readonly metrics: Metrics) {}

  /**
   * The Prometheus text format. Open like /health: it holds counts by answer code and
   * timings, never a user or product id.
   */
  @Get()
  @ApiOperation({
    summary: 'Prometheus metrics: purchases by code, lock wait and hold, batch size, lost locks, Redis errors, process',
  })
  @ApiProduces('text/plain')
  @ApiResponse({ status: 200, description: 'the Prometheus text format, version 0.0.4', schema: { type: 'string' } })
  scrape(@Res({ passthrough: true }) reply: FastifyReply): Promise<string> {
    void reply.header('content-type', this.metrics.registry.contentType);
    return this.metrics.registry.metrics();
  }
}
