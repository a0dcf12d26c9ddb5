import { holderPid, readInstances } from './live-event';

describe('the live hash read back (live-event.ts)', () => {
  it('groups fields by instance, answers apart from what the instance says of itself', () => {
    const hash = {
      'host-b/7|CREATED': '3',
      'host-b/7|pid': '7',
      'host-b/7|waiting': '0',
      'host-b/7|lostLocks': '0',
      'host-b/7|seen': '1000',
      'host-a/5|CREATED': '4',
      'host-a/5|LOCK_TIMEOUT': '2',
      'host-a/5|pid': '5',
      'host-a/5|waiting': '9',
      'host-a/5|lostLocks': '1',
      'host-a/5|seen': '1500',
    };
    expect(readInstances(hash, 2000)).toEqual([
      {
        id: 'host-a/5',
        pid: 5,
        answers: { CREATED: 4, LOCK_TIMEOUT: 2 },
        waiting: 9,
        lostLocks: 1,
        seenMsAgo: 500,
      },
      { id: 'host-b/7', pid: 7, answers: { CREATED: 3 }, waiting: 0, lostLocks: 0, seenMsAgo: 1000 },
    ]);
    expect(readInstances({}, 0)).toEqual([]);
  });

  it('reads the pid in a `<pid>:<token>` lock value, and none in a bare token or timestamp', () => {
    expect(holderPid('4242:0123456789abcdef0123456789abcdef')).toBe(4242);
    expect(holderPid('0123456789abcdef0123456789abcdef')).toBeNull();
    expect(holderPid('1760000000000')).toBeNull();
    expect(holderPid(null)).toBeNull();
  });
});
