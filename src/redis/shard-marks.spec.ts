import calculateSlot from 'cluster-key-slot';
import { MARK_TAGS, markSlot } from './shard-marks';

describe('shard marks (includes/shard-marks.lua)', () => {
  it('has 64 tags, read from the Lua include, tag i in slot i * 256: every run of 256 slots holds one', () => {
    expect(MARK_TAGS).toHaveLength(64);
    expect(new Set(MARK_TAGS).size).toBe(64);
    MARK_TAGS.forEach((tag, i) => expect(calculateSlot(`x:{w:${tag}}:settle`)).toBe(markSlot(i)));
  });
});
