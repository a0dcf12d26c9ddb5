import { Global, Module } from '@nestjs/common';
import { Metrics } from './metrics';
import { MetricsController } from './metrics.controller';
import { PurchaseTelemetry } from './purchase-telemetry';

/**
 * telemetry/: what the app says about itself while it sells (Prometheus metrics at
 * /metrics, the dashboard's aggregate). A floor like settings/: any feature may import
 * it, it imports no feature; features hand it what it reads (a lock's lost holds).
 */
@Global()
@Module({
  controllers: [MetricsController],
  providers: [PurchaseTelemetry, Metrics],
  exports: [PurchaseTelemetry, Metrics],
})
export class TelemetryModule {}
