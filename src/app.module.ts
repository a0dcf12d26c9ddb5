import { BadRequestException, DynamicModule, Module, ValidationError, ValidationPipe } from '@nestjs/common';
import { APP_FILTER, APP_PIPE } from '@nestjs/core';
import { AppConfig } from './config/app-config';
import { ConfigModule } from './config/config.module';
import { ErrorFilter } from './errors/error.filter';
import { HealthModule } from './health/health.module';
import { LocksModule } from './locks/locks.module';
import { OrdersModule } from './orders/orders.module';
import { ProductsModule } from './products/products.module';
import { RedisModule } from './redis/redis.module';

/**
 * Strict input: unknown fields are refused (not silently dropped), no implicit type
 * coercion ("1" is not 1), and every failure is one 400 VALIDATION_FAILED listing
 * each field's messages.
 */
const validationPipe = new ValidationPipe({
  whitelist: true,
  forbidNonWhitelisted: true,
  transform: true,
  forbidUnknownValues: true,
  // One message per field: the first rule it breaks.
  stopAtFirstError: true,
  exceptionFactory: (errors: ValidationError[]) => {
    const fields = errors.map((e) => ({ field: e.property, messages: Object.values(e.constraints ?? {}) }));
    const message = fields.flatMap((f) => f.messages).join('; ') || 'the request body is not a JSON object';
    return new BadRequestException({ code: 'VALIDATION_FAILED', message, errors: fields });
  },
});

@Module({})
export class AppModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: AppModule,
      imports: [ConfigModule.forRoot(config), RedisModule, LocksModule, ProductsModule, OrdersModule, HealthModule],
      providers: [
        { provide: APP_PIPE, useValue: validationPipe },
        { provide: APP_FILTER, useClass: ErrorFilter },
      ],
    };
  }
}
