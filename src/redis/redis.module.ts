import { Global, Inject, Logger, Module, OnApplicationShutdown } from '@nestjs/common';
import { Redis } from 'ioredis';
import { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.constants';
import { KeyLayout } from './key-layout';
import { REDIS_CLIENT } from './redis.constants';
import { defineScripts } from './redis-scripts';

/**
 * Upper bound on one command's round trip. A purchase must end in a definite answer,
 * so a command stuck on a dead socket fails (503 REDIS_UNAVAILABLE) instead of waiting
 * for a reconnect that may never come.
 */
const COMMAND_TIMEOUT_MS = 2_000;

@Global()
@Module({
  providers: [
    {
      provide: REDIS_CLIENT,
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig): Redis => {
        const logger = new Logger('Redis');
        const client = new Redis(config.redisUrl, {
          // No offline queue and one retry per request: while Redis is away, buyers
          // get an immediate 503 instead of piling up behind a reconnect.
          enableOfflineQueue: false,
          maxRetriesPerRequest: 1,
          commandTimeout: COMMAND_TIMEOUT_MS,
          connectionName: 'seckill',
          // On shutdown a socket that will not close cleanly is destroyed after this.
          disconnectTimeout: 500,
        });
        // ioredis emits one error per failed reconnect; say it once per outage.
        let outageReported = false;
        client.on('ready', () => {
          outageReported = false;
          logger.log(`connected to ${redactUrl(config.redisUrl)}`);
        });
        client.on('error', (err: Error) => {
          if (outageReported) return;
          outageReported = true;
          logger.warn(`unavailable: ${err.message}`);
        });
        defineScripts(client);
        return client;
      },
    },
    {
      provide: KeyLayout,
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) => new KeyLayout(config.keyPrefix),
    },
  ],
  exports: [REDIS_CLIENT, KeyLayout],
})
export class RedisModule implements OnApplicationShutdown {
  constructor(@Inject(REDIS_CLIENT) private readonly redis: Redis) {}

  /**
   * Runs after the HTTP server has closed, so no purchase still needs the client.
   * QUIT lets replies already on the wire arrive; a client that is not connected
   * has nothing to flush and is simply disconnected (and stops reconnecting).
   */
  async onApplicationShutdown(): Promise<void> {
    if (this.redis.status === 'ready') {
      await this.redis.quit().catch(() => this.redis.disconnect());
    } else {
      this.redis.disconnect();
    }
  }
}

function redactUrl(url: string): string {
  return url.replace(/\/\/([^@/]*)@/, '//***@');
}
