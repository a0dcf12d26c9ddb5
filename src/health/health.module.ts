import { Module } from '@nestjs/common';
import { HealthController } from './health.controller';

/** health/: GET /health, what a load balancer and the launchers wait for. */
@Module({ controllers: [HealthController] })
export class HealthModule {}
