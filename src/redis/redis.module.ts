import { Global, Inject, Logger, Module, OnApplicationShutdown } from '@nestjs/common';
import { Metrics } from '../telemetry/metrics';
import { KeyLayout } from './key-layout';
import { REDIS_CONFIG, RedisConfig } from './redis.config';
import { REDIS_CLIENT } from './redis.constants';
import { closeRedisClient, createAppRedisClient, type RedisClient } from './create-client';
import { markGuess } from './shard-marks';

/**
 * redis/: the shared ioredis client behind REDIS_CLIENT (one Redis, or a Redis Cluster;
 * closed on shutdown), the key layout, and the Lua scripts (src/redis/scripts/<name>-<numberOfKeys>.lua).
 */
@Global()
@Module({
  providers: [
    {
      provide: REDIS_CLIENT,
      inject: [REDIS_CONFIG.token, Metrics],
      useFactory: (config: RedisConfig, metrics: Metrics): RedisClient => {
        const client = createAppRedisClient(config);
        if (metrics.enabled) {
          // One per failed connect or reconnect (the log says each outage once); on a
          // cluster, each node connection's too.
          client.on('error', () => metrics.redisError('connection'));
          client.on('node error', () => metrics.redisError('connection'));
        }
        return client;
      },
    },
    {
      provide: KeyLayout,
      inject: [REDIS_CONFIG.token, REDIS_CLIENT],
      useFactory: (config: RedisConfig, client: RedisClient) => new KeyLayout(config.keyPrefix, markGuess(client)),
    },
  ],
  exports: [REDIS_CLIENT, KeyLayout],
})
export class RedisModule implements OnApplicationShutdown {
  constructor(@Inject(REDIS_CLIENT) private readonly redis: RedisClient) {}

  /**
   * Runs after the HTTP server has closed, so no purchase still needs the client.
   * QUIT lets replies already on the wire arrive; a client that is not connected
   * has nothing to flush and is simply disconnected (and stops reconnecting).
   */
  async onApplicationShutdown(): Promise<void> {
    await closeRedisClient(this.redis);
    new Logger('Redis').log('connection closed');
  }
}
