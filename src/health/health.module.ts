import { Module } from '@nestjs/common';
import { HEALTH_CONFIG, HealthController } from './health.controller';

/** health/: GET /health, what a load balancer and the launchers wait for. */
@Module({ controllers: [HealthController], providers: [HEALTH_CONFIG.provider] })
export class HealthModule {}
