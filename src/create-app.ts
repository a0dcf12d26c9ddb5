import { LogLevel as NestLogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { AppModule } from './app.module';
import { AppConfig, LOG_LEVELS } from './config/app-config';

/** Bodies larger than this are refused with 413 before they are parsed. */
export const BODY_LIMIT_BYTES = 16 * 1024;

/**
 * Builds the app exactly as main.ts runs it, so tests exercise the real HTTP
 * stack: Fastify limits, content-type handling, pipes and filters.
 */
export async function createApp(config: AppConfig, options: { logger?: false } = {}): Promise<NestFastifyApplication> {
  const adapter = new FastifyAdapter({ bodyLimit: BODY_LIMIT_BYTES });
  // Only JSON bodies: Fastify would otherwise parse text/plain into a string and
  // hand it to validation; refusing it up front gives a clear 415.
  adapter.getInstance().removeContentTypeParser('text/plain');
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(config), adapter, {
    logger: options.logger ?? enabledLevels(config),
    // No urlencoded parser: Fastify's own JSON parser is the only one registered.
    bodyParser: false,
  });
  await app.init();
  return app;
}

/** LOG_LEVEL names the least severe level shown: `log` shows error, warn and log. */
function enabledLevels(config: AppConfig): NestLogLevel[] {
  return LOG_LEVELS.slice(0, LOG_LEVELS.indexOf(config.logLevel) + 1) as NestLogLevel[];
}
