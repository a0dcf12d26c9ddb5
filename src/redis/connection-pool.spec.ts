import { Redis } from 'ioredis';
import { useTestRedis } from '../../test/helpers/redis';
import { ConnectionPool } from './connection-pool';

describe('ConnectionPool against a real Redis', () => {
  const { url } = useTestRedis();

  it('lends a fresh connection when the idle one has ended, instead of waiting for it to be ready', async () => {
    const made: Redis[] = [];
    const pool = new ConnectionPool(() => {
      const c = new Redis(url(), { retryStrategy: () => null });
      made.push(c);
      return c;
    }, 1);
    try {
      const deadline = () => performance.now() + 2_000;
      const timedOut = () => new Error('no connection in time');
      expect(await pool.use(deadline(), timedOut, (c) => c.ping())).toBe('PONG');
      // The idle connection ends (its node went away; it does not reconnect).
      made[0].disconnect();
      await new Promise<void>((resolve) => (made[0].status === 'end' ? resolve() : made[0].once('end', resolve)));
      expect(await pool.use(deadline(), timedOut, (c) => c.ping())).toBe('PONG');
      expect(made).toHaveLength(2);
    } finally {
      await pool.close();
    }
  });
});
