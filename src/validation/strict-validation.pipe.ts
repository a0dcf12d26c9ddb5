import { ArgumentMetadata, ValidationError, ValidationPipe } from '@nestjs/common';
import { ValidationFailedError } from '../errors/errors';
import { isSchemaChecked } from './schema-checked';

/**
 * Keys that would pass unseen: ValidationPipe deletes `__proto__`, `constructor` and
 * `prototype` before validating (prototype-pollution guard), and class-validator's
 * whitelist looks a key up in a plain object, so a key that names a member of
 * Object.prototype (`toString`, `valueOf`, `hasOwnProperty`, ...) counts as declared.
 */
const hiddenKey = (key: string): boolean => key === 'prototype' || key in Object.prototype;

interface FieldErrors {
  field: string;
  messages: string[];
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
      exceptionFactory: (errors: ValidationError[]) =>
        failed(errors.map((e) => ({ field: e.property, messages: Object.values(e.constraints ?? {}) }))),
    });
  }

  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    // The route's compiled schema, derived from this same DTO, accepted it already
    // (json-schema.ts: never looser than the DTO) and made it a DTO with its defaults.
    if (metadata.type === 'body' && isSchemaChecked(value, metadata.metatype)) return value;
    if (metadata.type === 'body' && typeof value === 'object' && value !== null) {
      const hidden = Object.keys(value).filter(hiddenKey);
      if (hidden.length > 0) {
        throw failed(hidden.map((key) => ({ field: key, messages: [`property ${key} should not exist`] })));
      }
    }
    return super.transform(value, metadata);
  }
}
