import 'reflect-metadata';
import Ajv from 'ajv';
import { IsEmail, IsInt, Matches, ValidateIf } from 'class-validator';
import { CreateOrderDto } from '../orders/dto/create-order.dto';
import { StartSaleDto } from '../products/dto/start-sale.dto';
import { ValidationFailedError } from '../errors/errors';
import { bodySchemaOf } from './json-schema';
import { Omittable } from './omittable';
import { STRICT_AJV } from './schema-checked';
import { StrictValidationPipe } from './strict-validation.pipe';

class WithEmail {
  @IsEmail()
  readonly email!: string;
}
class WithOtherCondition {
  @ValidateIf((_dto, value) => value !== null)
  @IsInt()
  readonly n!: number;
}
class WithFlags {
  @Matches(/^a+$/i)
  readonly s!: string;
}
class TwoPatterns {
  @Matches(/^a/)
  @Matches(/b$/)
  readonly s!: string;
}
class IntAndPattern {
  @IsInt()
  @Matches(/^\d+$/)
  readonly n!: number;
}
class ShortText {
  @Matches(/^.{1,2}$/)
  readonly s!: string;
}
class WithOmittable {
  @Omittable()
  @IsInt()
  readonly n: number = 7;
}

/** Whether the app's pipe (class-validator) takes `body` as a `dto`; any other error is thrown. */
function dtoAccepts(body: unknown, dto: new () => object): Promise<boolean> {
  return new StrictValidationPipe().transform(body, { type: 'body', metatype: dto }).then(
    () => true,
    (err: unknown) => {
      if (err instanceof ValidationFailedError) return false;
      throw err;
    },
  );
}

describe('bodySchemaOf', () => {
  it("derives POST /api/orders' body schema from CreateOrderDto", () => {
    expect(bodySchemaOf(CreateOrderDto)).toEqual({
      type: 'object',
      additionalProperties: false,
      required: ['productId', 'userId'],
      properties: {
        productId: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,64}$' },
        userId: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,64}$' },
        quantity: { type: 'integer', minimum: 1, maximum: 100 },
      },
    });
  });

  it('makes an Omittable field optional, nothing else', () => {
    expect(bodySchemaOf(WithOmittable).required).toEqual([]);
    expect(bodySchemaOf(StartSaleDto).required).toEqual(['stock']);
  });

  it('refuses what it cannot translate exactly, instead of a looser schema', () => {
    expect(() => bodySchemaOf(WithEmail)).toThrow('no JSON Schema for @isEmail on WithEmail.email');
    expect(() => bodySchemaOf(WithOtherCondition)).toThrow(/conditionalValidation on WithOtherCondition\.n/);
    expect(() => bodySchemaOf(WithFlags)).toThrow(/flagless RegExp/);
    // One keyword twice would be the second rule replacing the first.
    expect(() => bodySchemaOf(TwoPatterns)).toThrow(/a second rule for "pattern"/);
    expect(() => bodySchemaOf(IntAndPattern)).toThrow(/a second rule for "type"/);
  });

  it('means by a pattern what the RegExp means: code units, not code points', async () => {
    const validate = new Ajv(STRICT_AJV.customOptions).compile(bodySchemaOf(ShortText));
    for (const s of ['ab', 'abc', '\u{1F600}', '\u{1F600}\u{1F600}']) {
      const byDto = await dtoAccepts({ s }, ShortText);
      expect({ s, bySchema: validate({ s }) }).toEqual({ s, bySchema: byDto });
    }
  });

  /**
   * The route takes a body the schema accepts without asking class-validator, so the
   * schema must never accept one the DTO refuses. Checked over bodies around every
   * edge of every field, with Fastify's ajv under the app's settings.
   */
  it('never accepts a body CreateOrderDto refuses, and accepts every body it takes', async () => {
    const validate = new Ajv(STRICT_AJV.customOptions).compile(bodySchemaOf(CreateOrderDto));
    const ids = ['p', 'a'.repeat(64), 'a'.repeat(65), '', 'a b', 'a{b}', 'é', 'a\n', 7, null, true, ['p'], { p: 1 }];
    const quantities = [undefined, 1, 100, 0, 101, -1, 1.5, '2', null, true, [1], 1e300, Number.MAX_SAFE_INTEGER];
    const extras: Record<string, unknown>[] = [{}, { extra: 1 }, { constructor: 1 }, { toString: 'x' }];
    let accepted = 0;
    let compared = 0;
    for (const productId of ids) {
      for (const userId of [ids[0], ids[2], ids[9]]) {
        for (const quantity of quantities) {
          for (const extra of extras) {
            const body: Record<string, unknown> = { productId, userId, ...extra };
            if (quantity !== undefined) body.quantity = quantity;
            // JSON is what reaches the route: a value JSON cannot carry is not a case.
            const parsed = JSON.parse(JSON.stringify(body)) as Record<string, unknown>;
            const byDto = await dtoAccepts(parsed, CreateOrderDto);
            expect({ body: parsed, bySchema: validate(parsed) }).toEqual({ body: parsed, bySchema: byDto });
            compared += 1;
            if (byDto) accepted += 1;
          }
        }
      }
    }
    // Both sides of the line were really compared.
    expect(accepted).toBeGreaterThan(5);
    expect(compared - accepted).toBeGreaterThan(100);
  });
});
