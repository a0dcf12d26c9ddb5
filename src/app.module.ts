import { DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER, APP_PIPE } from '@nestjs/core';
import { LoggerModule } from 'nestjs-pino';
import { AppConfig } from './config/app-config';
import { ConfigModule } from './config/config.module';
import { DashboardModule } from './dashboard/dashboard.module';
import { DoorModule } from './door/door.module';
import { ErrorFilter } from './http/error.filter';
import { HealthModule } from './health/health.module';
import { OrdersModule } from './orders/orders.module';
import { ProductsModule } from './products/products.module';
import { RedisModule } from './redis/redis.module';
import { SettlementModule } from './settlement/settlement.module';
import { logParams } from './telemetry/log-params';
import { TelemetryModule } from './telemetry/telemetry.module';
import { StrictValidationPipe } from './validation/strict-validation.pipe';

@Module({})
export class AppModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(config),
        LoggerModule.forRoot(logParams(config)),
        TelemetryModule,
        RedisModule,
        DoorModule,
        OrdersModule.forRoot(config),
        ProductsModule,
        SettlementModule.forRoot(config),
        HealthModule,
        DashboardModule,
      ],
      providers: [
        { provide: APP_PIPE, useValue: new StrictValidationPipe() },
        { provide: APP_FILTER, useClass: ErrorFilter },
      ],
    };
  }
}
