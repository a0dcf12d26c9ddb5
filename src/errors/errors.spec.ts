import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ERROR_CODES, LockExpiredError, LockTimeoutError, ContentionError, SoldOutError } from './errors';

describe('the error table (errors.ts)', () => {
  it('gives each code one status and each meaning its own code', () => {
    expect(ERROR_CODES.size).toBeGreaterThan(15);
    // The three ways a buyer can be told "not now" by a lock or a race are three codes.
    const codes = [new LockTimeoutError(1), new LockExpiredError(1), new ContentionError(1, 1)].map((e) => e.code);
    expect(new Set(codes).size).toBe(3);
    expect(new SoldOutError('p')).toMatchObject({
      code: 'SOLD_OUT',
      status: 409,
      message: 'product "p" is sold out',
      name: 'SoldOutError',
    });
  });

  it('words CONTENTION for a buyer who never got an attempt, one who got one, and one who got several', () => {
    expect(new ContentionError(0, 200).message).toMatch(
      /used the whole wait budget \(200 ms\) before this one's first/,
    );
    expect(new ContentionError(1, 200).message).toMatch(/under 1 optimistic attempt \(/);
    expect(new ContentionError(8, 200).message).toMatch(/under 8 optimistic attempts \(/);
  });

  it('gives every code its example answer, made by its own class, under its declaration', () => {
    const made = [...ERROR_CODES].map(([code, declared]) => {
      const example = declared.example?.();
      return { code, status: declared.status, made: example && { code: example.code, status: example.status } };
    });
    expect(made).toEqual(made.map(({ code, status }) => ({ code, status, made: { code, status } })));
  });

  it("is docs/api.md's error table: every code, with its status, and nothing else", () => {
    const page = readFileSync(join(__dirname, '..', '..', 'docs', 'api.md'), 'utf8');
    const rows = [...page.matchAll(/^\| `([A-Z_]+)` \| (\d{3}) \|/gm)].map((m) => [m[1], Number(m[2])]);
    expect(new Map(rows as [string, number][])).toEqual(
      new Map([...ERROR_CODES].map(([code, { status }]) => [code, status])),
    );
  });
});
