import { Global, Module } from '@nestjs/common';
import { PurchaseTelemetry } from './purchase-telemetry';

/**
 * telemetry/: what the app says about itself while it sells (Prometheus metrics, the
 * dashboard's aggregate). A floor like config/: any feature may import it, it imports
 * no feature.
 */
@Global()
@Module({ providers: [PurchaseTelemetry], exports: [PurchaseTelemetry] })
export class TelemetryModule {}
