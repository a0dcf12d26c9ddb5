import { DynamicModule, Global, Module } from '@nestjs/common';
import { AppConfig, CONFIG_SECTIONS, sliceOf } from './app-config';

/**
 * config/: environment -> frozen, validated AppConfig, each section provided under its
 * own token (`<feature>.config.ts`), so a class takes the settings of its feature, not
 * the whole configuration (the NestJS per-feature config). The config is loaded once,
 * outside Nest (main.ts fails fast on a bad value before any module is built), and
 * handed in here so tests can pass their own.
 */
@Global()
@Module({})
export class ConfigModule {
  static forRoot(config: AppConfig): DynamicModule {
    const providers = CONFIG_SECTIONS.map((s) => ({ provide: s.token, useValue: sliceOf(s, config) }));
    return { module: ConfigModule, providers, exports: providers.map((p) => p.provide) };
  }
}
