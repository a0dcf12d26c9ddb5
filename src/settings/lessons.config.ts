import { ConfigError, ConfigOf, defaulted, flag, oneOf, section, setting } from './setting';

/**
 * before-write: a lock holder (or an `optimistic` attempt) with its decision made, its write not yet sent.
 * settle-before-commit / settle-before-ack: the settler with a batch written to
 * PostgreSQL, before its COMMIT / after it and before its XACK.
 * sweep-between: the expiry sweeper between two expiries of one sweep.
 * move-between: an escrow move (src/orders/escrow.ts) out of its source, not yet landed.
 */
export const FAULT_POINTS = [
  'before-write',
  'settle-before-commit',
  'settle-before-ack',
  'sweep-between',
  'move-between',
] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];
export interface FaultStop {
  readonly point: FaultPoint;
  /** Stop on the nth time the point is reached (1 = the first). */
  readonly nth: number;
}

/**
 * The lesson and fault switches, apart from the service's settings: each one makes the
 * app unsafe on purpose, so each is accepted only with ALLOW_UNSAFE=1 (the rules between
 * variables, src/config/app-config.ts) and none in a real deployment.
 */
export const LESSONS_CONFIG = section(
  'lessons',
  {
    allowUnsafe: flag(
      'ALLOW_UNSAFE',
      false,
      'must be `1` to run an unsafe strategy (`none` and the classic mistakes), `SALE_CLOCK=app` or a fault switch below; logged loudly at boot',
    ),
    saleClock: oneOf(
      'SALE_CLOCK',
      ['redis', 'app'] as const,
      'redis',
      "whose clock judges the sale window: `redis`, the clock of the Redis that holds the sale, read in the step that decides; `app` (only with `ALLOW_UNSAFE=1`) is the naive guard peers use, this process's own clock, kept to show it selling early ([the door](door.md))",
    ),
    faultStopAt: setting(
      'FAULT_STOP_AT',
      'unset',
      "fault suite only: accepted only with `ALLOW_UNSAFE=1` and never with `NODE_ENV=production`, and `/health` then says `unsafe: true, faultStopAt`. `before-write:<n>` makes the process stop itself (`SIGSTOP`) at its nth hold (or `optimistic` attempt) that reaches its write, right after its validity check, so the suite freezes a holder at that exact point ([faults.md](faults.md)); `settle-before-commit:<n>` and `settle-before-ack:<n>` stop the settler with its nth batch written, before its `COMMIT` or after it and before its `XACK`; `sweep-between:<n>` stops the expiry sweeper between two expiries; `move-between:<n>` stops an escrow move between its source's step and its landing ([scaling.md](scaling.md))",
      faultStop,
    ),
    faultClockSkewMs: defaulted(
      'FAULT_CLOCK_SKEW_MS',
      0,
      "tests only, like `FAULT_STOP_AT` (`ALLOW_UNSAFE=1`, never with `NODE_ENV=production`): the app's own clock runs that many ms ahead (negative: behind). Nothing the sale decides reads it: the window is Redis's clock ([the door](door.md))",
      (value) => {
        if (!/^-?\d{1,9}$/.test(value) || Math.abs(Number(value)) > 86_400_000) {
          throw new ConfigError(
            'FAULT_CLOCK_SKEW_MS',
            `must be an integer of ms from -86400000 to 86400000, got "${value}"`,
          );
        }
        return Number(value);
      },
    ),
  },
  'lessons',
);
export type LessonsConfig = ConfigOf<typeof LESSONS_CONFIG>;

function faultStop(value: string | undefined): FaultStop | null {
  if (value === undefined) return null;
  const [point, nth] = value.split(':');
  if (!(FAULT_POINTS as readonly string[]).includes(point) || !/^[1-9]\d{0,5}$/.test(nth ?? '')) {
    throw new ConfigError(
      'FAULT_STOP_AT',
      `must be <point>:<n> with a point of ${FAULT_POINTS.join(', ')} and n >= 1, got "${value}"`,
    );
  }
  return { point: point as FaultPoint, nth: Number(nth) };
}

/**
 * What a purchase path takes as "now" for the sale window, given Redis's clock read in
 * the deciding step: that clock (SALE_CLOCK=redis), or, for the lesson, this process's
 * own clock (SALE_CLOCK=app, shifted by FAULT_CLOCK_SKEW_MS).
 */
export function saleClock(
  config: Pick<LessonsConfig, 'saleClock' | 'faultClockSkewMs'>,
): ((redisNow: number) => number) | undefined {
  return config.saleClock === 'app' ? () => Date.now() + config.faultClockSkewMs : undefined;
}
