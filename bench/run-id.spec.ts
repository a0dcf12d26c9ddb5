import { newRunId } from './run-id';

describe('newRunId', () => {
  it('differs for runs started in the same millisecond, in lower-case letters and digits', () => {
    const ids = new Set(Array.from({ length: 100 }, () => newRunId(1_700_000_000_000)));
    expect(ids.size).toBe(100);
    for (const id of ids) expect(id).toMatch(/^[a-z0-9]+$/);
  });
});
