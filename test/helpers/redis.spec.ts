import { once } from 'node:events';
import { Redis } from 'ioredis';
import { closeClient, startTestRedis } from './redis';

describe('closeClient', () => {
  it('closes a client while its Redis runs', async () => {
    const redis = await startTestRedis();
    try {
      const client = new Redis(redis.url);
      await client.ping();
      const ended = once(client, 'end');
      await closeClient(client);
      await ended;
    } finally {
      await redis.stop();
    }
  });

  it('disconnects a client whose Redis is already gone (a node a spec killed), without error', async () => {
    const redis = await startTestRedis();
    // Its disconnect timer (see closeClient) is 1 ms here, not 2 s.
    const client = new Redis(redis.url, { disconnectTimeout: 1 });
    await client.ping();
    const closed = once(client, 'close');
    await redis.stop();
    await closed;
    await expect(closeClient(client)).resolves.toBeUndefined();
  });
});
