import { soldOverTime } from './timeline';

const T0 = 1_700_000_000_000;
const order = (ms: number, quantity = 1) => ({ ms: T0 + ms, quantity });

describe('soldOverTime', () => {
  it('counts units cumulatively from the load start, one point per Redis millisecond, in time order', () => {
    const orders = [order(7), order(5), order(5, 2), order(9)];
    expect(soldOverTime(orders, T0, 10)).toEqual([
      { ms: 0, units: 0 },
      { ms: 5, units: 3 },
      { ms: 7, units: 4 },
      { ms: 9, units: 5 },
    ]);
  });

  it('keeps the exact sell-out point inside its millisecond, then what sold past it', () => {
    const orders = [order(1), order(2), order(2), order(2), order(3)];
    expect(soldOverTime(orders, T0, 2)).toEqual([
      { ms: 0, units: 0 },
      { ms: 1, units: 1 },
      { ms: 2, units: 2 },
      { ms: 2, units: 4 },
      { ms: 3, units: 5 },
    ]);
  });

  it('thins a long sale to at most maxPoints, keeping the start, the sell-out and the last point', () => {
    const orders = Array.from({ length: 5000 }, (_, i) => order(i * 2));
    const points = soldOverTime(orders, T0, 1234, 50);
    expect(points.length).toBeLessThanOrEqual(50);
    expect(points.length).toBeGreaterThan(40);
    expect(points[0]).toEqual({ ms: 0, units: 0 });
    expect(points).toContainEqual({ ms: 1233 * 2, units: 1234 });
    expect(points[points.length - 1]).toEqual({ ms: 4999 * 2, units: 5000 });
    for (let i = 1; i < points.length; i++) {
      expect(points[i].ms).toBeGreaterThanOrEqual(points[i - 1].ms);
      expect(points[i].units).toBeGreaterThan(points[i - 1].units);
    }
  });

  it('takes a unit given back (a negative entry) off the line when it went back, and resold units on again', () => {
    const orders = [order(1), order(2), order(4, -1), order(6)];
    expect(soldOverTime(orders, T0, 2)).toEqual([
      { ms: 0, units: 0 },
      { ms: 1, units: 1 },
      { ms: 2, units: 2 },
      { ms: 4, units: 1 },
      { ms: 6, units: 2 },
    ]);
  });

  it('is a flat start for a sale with no orders', () => {
    expect(soldOverTime([], T0, 0)).toEqual([{ ms: 0, units: 0 }]);
  });
});
