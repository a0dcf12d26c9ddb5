import { ValidateIf } from 'class-validator';

/** The condition OMITTABLE validates under; json-schema.ts knows it by identity. */
export const PRESENT = (_dto: object, value: unknown): boolean => value !== undefined;

/**
 * The field may be left out (its class default applies), but a value that is there,
 * null included, must pass the field's rules: null is refused, not defaulted.
 */
export const Omittable = (): PropertyDecorator => ValidateIf(PRESENT);
