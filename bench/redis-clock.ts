import type { Redis } from 'ioredis';

/**
 * Redis's clock minus this process's, in milliseconds, from one TIME taken in the middle
 * of its round trip. Order stream ids carry Redis's clock and a load's start carries
 * ours: on another host (`--redis`) the two can differ by more than a whole sale, so
 * the sale's timeline and sell-out time put the load's start on Redis's clock first.
 */
export async function redisClockSkewMs(client: Pick<Redis, 'time'>): Promise<number> {
  const sent = Date.now();
  const [seconds, micros] = await client.time();
  const answered = Date.now();
  // Whole milliseconds, as both clocks are read: figures built on it (sell-out ms) stay whole.
  return Math.round(Number(seconds) * 1000 + Number(micros) / 1000 - (sent + answered) / 2);
}
