import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Review 42: fenced-acquire-3.lua became fenced-acquire-6.lua (97bbd81), but the header
 * of fenced.strategy.ts, the page a reader of the lab's guide opens second, still
 * teaches the old script. Every `<name>-<numberOfKeys>.lua` the lock code names must exist.
 */
describe('the locks name the scripts that exist (review 42)', () => {
  const scripts = new Set(readdirSync(join(__dirname, '../../redis/scripts')).filter((f) => f.endsWith('.lua')));
  const dirs = [__dirname, join(__dirname, '..')];

  it('every script file a lock file names is in src/redis/scripts', () => {
    const missing: string[] = [];
    for (const dir of dirs) {
      for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts') && !f.endsWith('.spec.ts'))) {
        const text = readFileSync(join(dir, file), 'utf8');
        for (const [name] of text.matchAll(/\b[a-z][a-z0-9-]*-\d+\.lua\b/g)) {
          if (!scripts.has(name)) missing.push(`${file}: ${name}`);
        }
      }
    }
    expect(missing).toEqual([]);
  });
});
