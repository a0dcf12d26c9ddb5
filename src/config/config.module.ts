import { DynamicModule, Global, Module } from '@nestjs/common';
import { AppConfig } from './app-config';
import { APP_CONFIG } from './config.constants';

/**
 * config/: environment -> frozen, validated AppConfig, provided as APP_CONFIG.
 * The config is loaded once, outside Nest (main.ts fails fast on a bad value
 * before any module is built), and handed in here so tests can pass their own.
 */
@Global()
@Module({})
export class ConfigModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: ConfigModule,
      providers: [{ provide: APP_CONFIG, useValue: config }],
      exports: [APP_CONFIG],
    };
  }
}
