import { ArgumentMetadata, ValidationError, ValidationPipe } from '@nestjs/common';
import { ValidationFailedError } from '../errors/errors';

/** Keys ValidationPipe deletes before validating (prototype-pollution guard), so they would pass unseen. */
const PROTOTYPE_KEYS = ['__proto__', 'constructor', 'prototype'];

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
 * would be accepted as if the key were not there (found by test/fuzz.e2e-spec.ts).
 * They are refused here like any other unknown field.
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
    if (metadata.type === 'body' && typeof value === 'object' && value !== null) {
      const hidden = Object.keys(value).filter((key) => PROTOTYPE_KEYS.includes(key));
      if (hidden.length > 0) {
        throw failed(hidden.map((key) => ({ field: key, messages: [`property ${key} should not exist`] })));
      }
    }
    return super.transform(value, metadata);
  }
}
