import { setTimeout as sleep } from 'node:timers/promises';
import { LockTimeoutError } from '../errors/errors';
import { LocalQueue } from './local-queue';

describe('LocalQueue', () => {
  it('lets callers of one key in one at a time, in arrival order', async () => {
    const line = new LocalQueue();
    const order: number[] = [];
    let inside = 0;
    let maxInside = 0;
    await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        await line.enter('k', 5_000);
        maxInside = Math.max(maxInside, ++inside);
        order.push(i);
        await sleep(1);
        inside--;
        line.leave('k');
      }),
    );
    expect(maxInside).toBe(1);
    expect(order).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(line.waiting('k')).toBe(0);
  });

  it('keeps keys independent', async () => {
    const line = new LocalQueue();
    await line.enter('a', 1_000);
    await expect(line.enter('b', 10)).resolves.toBeUndefined();
    line.leave('a');
    line.leave('b');
  });

  it('gives up with LockTimeoutError after waitMs, and the line moves on', async () => {
    const line = new LocalQueue();
    await line.enter('k', 1_000);
    await expect(line.enter('k', 50)).rejects.toBeInstanceOf(LockTimeoutError);
    expect(line.waiting('k')).toBe(0);
    line.leave('k');
    await expect(line.enter('k', 1_000)).resolves.toBeUndefined();
    line.leave('k');
  });

  it('leaves the line with the abort reason when the signal fires', async () => {
    const line = new LocalQueue();
    await line.enter('k', 5_000);
    const stop = new AbortController();
    const waiting = line.enter('k', 5_000, stop.signal);
    stop.abort(new Error('sold out'));
    await expect(waiting).rejects.toThrow('sold out');
    expect(line.waiting('k')).toBe(0);
    line.leave('k');
  });

  it('never lets a later caller past one still inside, even when a caller between them leaves early', async () => {
    const line = new LocalQueue();
    await line.enter('k', 5_000);
    const quitter = line.enter('k', 20); // times out while the first is inside
    let thirdIn = false;
    const third = line.enter('k', 5_000).then(() => (thirdIn = true));
    await expect(quitter).rejects.toBeInstanceOf(LockTimeoutError);
    await sleep(30);
    expect(thirdIn).toBe(false);
    line.leave('k');
    await third;
    expect(thirdIn).toBe(true);
    line.leave('k');
  });
});
