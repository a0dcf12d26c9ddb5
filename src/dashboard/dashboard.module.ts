import { Module } from '@nestjs/common';
import { DashboardController } from './dashboard.controller';
import { LiveController } from './live.controller';
import { LIVE_CONFIG, LiveFeed } from './live-feed';
import { LiveSales } from './live-sales';

/**
 * dashboard/: the live sale page at `/`, fed by Server-Sent Events from each
 * instance's aggregate (LiveSales) as the product's live hash in Redis holds it.
 * Not global: Nest calls its shutdown hook (the last publish) before RedisModule's. It
 * exports nothing: products/ tells it of a sale reset through PurchaseTelemetry.
 */
@Module({
  controllers: [DashboardController, LiveController],
  providers: [LiveSales, LiveFeed, LIVE_CONFIG.provider],
})
export class DashboardModule {}
