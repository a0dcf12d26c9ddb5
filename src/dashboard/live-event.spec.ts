import { holderPid, liveOrders, readInstances, STALE_AFTER_MS, sumOrders } from './live-event';

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
        stale: false,
        lostLocks: 1,
        seenMsAgo: 500,
      },
      { id: 'host-b/7', pid: 7, answers: { CREATED: 3 }, waiting: 0, stale: false, lostLocks: 0, seenMsAgo: 1000 },
    ]);
    expect(readInstances({}, 0)).toEqual([]);
  });

  it('does not count the waiting buyers of an instance unseen past STALE_AFTER_MS (crashed); keeps its answers', () => {
    const hash = {
      'dead/1|CREATED': '4',
      'dead/1|waiting': '7',
      'dead/1|seen': '1000',
      'idle/2|CREATED': '2',
      'idle/2|waiting': '0',
      'idle/2|seen': '1000',
      'live/3|waiting': '5',
      'live/3|seen': String(1000 + 10_000 - STALE_AFTER_MS),
    };
    const [dead, idle, live] = readInstances(hash, 1000 + 10_000);
    expect(dead).toMatchObject({ id: 'dead/1', waiting: 0, stale: true, answers: { CREATED: 4 }, seenMsAgo: 10_000 });
    // Nobody waiting, so no heartbeat is owed: quiet, not gone.
    expect(idle).toMatchObject({ id: 'idle/2', waiting: 0, stale: false, answers: { CREATED: 2 } });
    expect(live).toMatchObject({ id: 'live/3', waiting: 5, stale: false });
  });

  it('tells the orders by state from two counts and the meta hash, paid as what is left; null for a count Redis does not keep', () => {
    // 10 written, 3 still reserved, 2 cancelled and 1 expired, giving back 4 units: 4 paid.
    expect(liveOrders(10, 3, ['900000', '2', '1', '4'])).toEqual({
      written: 10,
      reserved: 3,
      paid: 4,
      cancelled: 2,
      expired: 1,
      unitsReturned: 4,
    });
    // A sale whose Redis does not count returns: what is known, and nothing made up.
    expect(liveOrders(10, 3, ['900000', null, null, null])).toEqual({
      written: 10,
      reserved: 3,
      paid: null,
      cancelled: null,
      expired: null,
      unitsReturned: null,
    });
    // A sale without a payment deadline has no reservations in the sorted set to count.
    expect(liveOrders(10, 0, [null, '0', '0', '0'])).toMatchObject({ written: 10, reserved: null, paid: null });
  });

  it("sums several escrow buckets' orders as one sale's, a count unknown in any bucket unknown in the sum", () => {
    const a = liveOrders(10, 3, ['900000', '2', '1', '4']);
    const b = liveOrders(5, 1, ['900000', '1', '0', '1']);
    expect(sumOrders([a, b])).toEqual({
      written: 15,
      reserved: 4,
      paid: 7,
      cancelled: 3,
      expired: 1,
      unitsReturned: 5,
    });
    expect(sumOrders([a, liveOrders(5, 1, ['900000', null, null, null])])).toEqual({
      written: 15,
      reserved: 4,
      paid: null,
      cancelled: null,
      expired: null,
      unitsReturned: null,
    });
  });

  it('reads the pid in a `<pid>:<token>` lock value, and none in a bare token or timestamp', () => {
    expect(holderPid('4242:0123456789abcdef0123456789abcdef')).toBe(4242);
    expect(holderPid('0123456789abcdef0123456789abcdef')).toBeNull();
    expect(holderPid('1760000000000')).toBeNull();
    expect(holderPid(null)).toBeNull();
  });
});
