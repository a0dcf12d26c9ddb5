import { ArgumentMetadata, ValidationError, ValidationPipe } from '@nestjs/common';
import { ValidationFailedError } from '../errors/errors';
import { isSchemaChecked } from './schema-checked';

/** Keys ValidationPipe deletes before validating (prototype-pollution guard), so they would pass unseen. */
const PROTOTYPE_KEYS = ['__proto__', 'constructor', 'prototype'];

/**
 * Keys class-validator's whitelist takes for declared fields: it looks a key up in a
 * plain object, so one that names a member of Object.prototype (`toString`, `valueOf`,
 * `hasOwnProperty`, ...) passes as if the DTO had it.
 */
const inheritedKey = (key: string): boolean => key in Object.prototype && !PROTOTYPE_KEYS.includes(key);

const notAllowed = (key: string): FieldErrors => ({ field: key, messages: [`property ${key} should not exist`] });

interface FieldErrors {
  field: string;
  messages: string[];
}

/** Each field's messages; a nested object's fields as `outer.inner`. */
function fieldErrors(errors: readonly ValidationError[], prefix = ''): FieldErrors[] {
  return errors.flatMap((e) => {
    const field = `${prefix}${e.property}`;
    const own = Object.values(e.constraints ?? {});
    const inner = fieldErrors(e.children ?? [], `${field}.`);
    return own.length > 0 || inner.length === 0 ? [{ field, messages: own }, ...inner] : inner;
  });
}

function failed(fields: FieldErrors[]): ValidationFailedError {
  const message = fields.flatMap((f) => f.messages).join('; ') || 'the request body is not a JSON object';
  return new ValidationFailedError(message, fields);
}

/**
 * Strict input: unknown fields are refused (not silently dropped), no implicit type
 * coercion ("1" is not 1), and every failure is one 400 VALIDATION_FAILED listing
 * each field's messages.
 *
 * Nest's ValidationPipe silently deletes `constructor` and `prototype` keys from a
 * body before validating it, so `{"productId":"p","userId":"u","constructor":0}`
 * would be accepted as if the key were not there (found by test/fuzz.e2e-spec.ts), and
 * class-validator's whitelist let `"toString":"x"` through (found by comparing it with
 * the route's JSON Schema, json-schema.spec.ts). They are refused here like any other
 * unknown field.
 */
export class StrictValidationPipe extends ValidationPipe {
  constructor() {
    super({
      whitelist: true,
      forbidNonWhitelisted: true,
      transform: true,
      forbidUnknownValues: true,
      // One message per field: the first rule it breaks.
      stopAtFirstError: true,
      exceptionFactory: (errors: ValidationError[]) => failed(fieldErrors(errors)),
    });
  }

  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    // The route's compiled schema, derived from this same DTO, accepted it already
    // (json-schema.ts: never looser than the DTO) and made it a DTO with its defaults.
    if (metadata.type === 'body' && isSchemaChecked(value, metadata.metatype)) return value;
    if (metadata.type !== 'body' || typeof value !== 'object' || value === null) {
      return super.transform(value, metadata);
    }
    const keys = Object.keys(value);
    const deleted = keys.filter((key) => PROTOTYPE_KEYS.includes(key));
    if (deleted.length > 0) throw failed(deleted.map(notAllowed));
    const inherited = keys.filter(inheritedKey);
    if (inherited.length === 0) return super.transform(value, metadata);
    // Listed after whatever else class-validator finds wrong, as an unknown field is.
    let fields: FieldErrors[] = [];
    try {
      await super.transform(value, metadata);
    } catch (err) {
      if (!(err instanceof ValidationFailedError)) throw err;
      fields = [...((err.errors as FieldErrors[] | undefined) ?? [])];
    }
    throw failed([...fields, ...inherited.map(notAllowed)]);
  }
}
