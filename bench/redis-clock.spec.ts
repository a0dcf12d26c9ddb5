import { redisClockSkewMs } from './redis-clock';
import { useTestRedis } from '../test/helpers/redis';

describe('redisClockSkewMs', () => {
  const { client } = useTestRedis();

  it('is a whole number of milliseconds, so the sell-out time built on it stays whole', async () => {
    expect(Number.isInteger(await redisClockSkewMs(client()))).toBe(true);
  });
});
