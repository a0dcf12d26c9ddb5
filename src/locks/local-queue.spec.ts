import { setTimeout as sleep } from 'node:timers/promises';
import { LockTimeoutError } from '../errors/domain-errors';
import { LocalQueue } from './local-queue';

describe('LocalQueue', () => {
  it('lets callers of one key in one at a time, in arrival order', async () => {
    const line = new LocalQueue();
    const order: number[] = [];
    let inside = 0;
    let maxInside = 0;
    await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const leave = await line.enter('k', 5_000);
        maxInside = Math.max(maxInside, ++inside);
        order.push(i);
        await sleep(1);
        inside--;
        leave();
      }),
    );
    expect(maxInside).toBe(1);
    expect(order).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });

  it('keeps keys independent', async () => {
    const line = new LocalQueue();
    const leaveA = await line.enter('a', 1_000);
    const leaveB = await line.enter('b', 10); // not blocked by a
    leaveA();
    leaveB();
  });

  it('gives up with LockTimeoutError after waitMs, and the line moves on', async () => {
    const line = new LocalQueue();
    const leaveFirst = await line.enter('k', 1_000);
    await expect(line.enter('k', 50)).rejects.toBeInstanceOf(LockTimeoutError);
    leaveFirst();
    const leave = await line.enter('k', 1_000);
    leave();
  });

  it('leaves the line with the abort reason when the signal fires', async () => {
    const line = new LocalQueue();
    const leaveFirst = await line.enter('k', 5_000);
    const stop = new AbortController();
    const waiting = line.enter('k', 5_000, stop.signal);
    stop.abort(new Error('sold out'));
    await expect(waiting).rejects.toThrow('sold out');
    leaveFirst();
  });

  it('never lets a later caller past one still inside, even when a caller between them leaves early', async () => {
    const line = new LocalQueue();
    const leaveFirst = await line.enter('k', 5_000);
    const quitter = line.enter('k', 20); // times out while the first is inside
    let thirdIn = false;
    const third = line.enter('k', 5_000).then((leave) => {
      thirdIn = true;
      return leave;
    });
    await expect(quitter).rejects.toBeInstanceOf(LockTimeoutError);
    await sleep(30);
    expect(thirdIn).toBe(false);
    leaveFirst();
    (await third)();
    expect(thirdIn).toBe(true);
  });
});
