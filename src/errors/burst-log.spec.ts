import { setTimeout as sleep } from 'node:timers/promises';
import { BurstLog } from './burst-log';

describe('BurstLog', () => {
  it('writes the first of a kind at once, counts the rest of its window, and says how many in one line', async () => {
    const lines: string[] = [];
    const log = new BurstLog((line) => lines.push(line), 50);
    for (let i = 0; i < 256; i++) log.say('REDIS_OUT_OF_MEMORY', 'Redis refused a command (REDIS_OUT_OF_MEMORY): OOM');
    log.say('REDIS_READ_ONLY', 'Redis refused a command (REDIS_READ_ONLY): READONLY');
    expect(lines).toEqual([
      'Redis refused a command (REDIS_OUT_OF_MEMORY): OOM',
      'Redis refused a command (REDIS_READ_ONLY): READONLY',
    ]);
    while (lines.length < 3) await sleep(10);
    expect(lines[2]).toBe(
      'REDIS_OUT_OF_MEMORY: 255 more times in the 0.05 s after: Redis refused a command (REDIS_OUT_OF_MEMORY): OOM',
    );
    // A kind met once says nothing more; after the window a new burst starts with a line.
    await sleep(80);
    expect(lines).toHaveLength(3);
    log.say('REDIS_OUT_OF_MEMORY', 'again');
    expect(lines[3]).toBe('again');
  });
});
