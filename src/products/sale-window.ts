import { ValidationFailedError } from '../errors/errors';

/** A sale window's ISO 8601 instants as ms, or a 400 naming the field: a real date, and endsAt after startsAt. */
export function saleWindow(startsAt?: string, endsAt?: string): { startsAt?: number; endsAt?: number } {
  const ms = (field: string, value: string | undefined): number | undefined => {
    if (value === undefined) return undefined;
    const parsed = Date.parse(value);
    // Date.parse rolls 2026-02-30 over to March: a date that does not exist is refused.
    if (Number.isNaN(parsed) || new Date(parsed).toISOString().slice(0, 10) !== utcDate(value, parsed)) {
      const rule = `${field} is not a real date and time: ${value}`;
      throw new ValidationFailedError(rule, [{ field, messages: [rule] }]);
    }
    return parsed;
  };
  const window = { startsAt: ms('startsAt', startsAt), endsAt: ms('endsAt', endsAt) };
  if (window.startsAt !== undefined && window.endsAt !== undefined && window.endsAt <= window.startsAt) {
    const rule = 'endsAt must be after startsAt';
    throw new ValidationFailedError(rule, [{ field: 'endsAt', messages: [rule] }]);
  }
  return window;
}

/** The UTC date `value` names, computed from its own fields and offset (not Date's rollover). */
function utcDate(value: string, parsed: number): string {
  const [, y, mo, d] = /^(\d{4})-(\d{2})-(\d{2})/.exec(value)!;
  const days = new Date(Date.UTC(Number(y), Number(mo) - 1, 1)).getUTCMonth() === Number(mo) - 1;
  const real = days && Number(d) >= 1 && Number(d) <= new Date(Date.UTC(Number(y), Number(mo), 0)).getUTCDate();
  return real ? new Date(parsed).toISOString().slice(0, 10) : 'invalid';
}
