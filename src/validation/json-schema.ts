import { Type } from 'class-transformer';
import { getMetadataStorage, IsObject, ValidateNested, ValidationTypes } from 'class-validator';
import { PRESENT } from './omittable';

/** A JSON Schema (draft 7, as Fastify's ajv reads it) for a flat body of strings, integers and booleans. */
export interface BodySchema {
  readonly type: 'object';
  readonly additionalProperties: false;
  readonly required: readonly string[];
  readonly properties: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
}

/** The DTO each derived schema came from, for the route that uses it (schema-checked.ts). */
const DTOS = new WeakMap<object, new () => object>();

/** The DTO a body schema was derived from, if it was. */
export function dtoOf(schema: unknown): (new () => object) | undefined {
  return typeof schema === 'object' && schema !== null ? DTOS.get(schema) : undefined;
}

/** What each class-validator rule is in JSON Schema; a rule missing here stops the derivation. */
const RULES: Readonly<Record<string, (constraints: readonly unknown[]) => Record<string, unknown>>> = {
  matches: ([pattern, modifiers]) => {
    // Compiled by ajv without its default `u` flag (STRICT_AJV), a flagless source means
    // what the RegExp means: `.` and `{1,2}` count UTF-16 code units in both.
    if (!(pattern instanceof RegExp) || pattern.flags !== '' || modifiers !== undefined) {
      throw new Error('only a flagless RegExp has the same meaning in JSON Schema');
    }
    return { type: 'string', pattern: pattern.source };
  },
  isInt: () => ({ type: 'integer' }),
  isObject: () => ({ type: 'object' }),
  isBoolean: () => ({ type: 'boolean' }),
  min: ([min]) => ({ minimum: min }),
  max: ([max]) => ({ maximum: max }),
};

/**
 * The JSON Schema of a class-validator DTO, derived from its decorators, so the DTO
 * stays the one definition of the body. The schema must never accept a body the DTO
 * refuses (the route takes what it accepts without asking class-validator again), so a
 * decorator it cannot translate exactly is an error at start-up, not a looser schema:
 * unknown rules, `each`, groups, and any conditional other than Omittable. Unknown
 * fields are refused as the StrictValidationPipe refuses them (forbidNonWhitelisted).
 */
export function bodySchemaOf(dto: new () => object): BodySchema {
  const metadatas = getMetadataStorage().getTargetValidationMetadatas(dto, '', true, false);
  const properties: Record<string, Record<string, unknown>> = {};
  const omittable = new Set<string>();
  for (const meta of metadatas) {
    const where = `@${meta.name ?? meta.type} on ${dto.name}.${meta.propertyName}`;
    const property = (properties[meta.propertyName] ??= {});
    if (meta.each || (meta.groups?.length ?? 0) > 0 || meta.always) {
      throw new Error(`no JSON Schema for ${where}: each, groups and always are not translated`);
    }
    if (meta.type === ValidationTypes.CONDITIONAL_VALIDATION && meta.constraints[0] === PRESENT) {
      omittable.add(meta.propertyName);
      continue;
    }
    if (meta.type === ValidationTypes.NESTED_VALIDATION) {
      const inner = nestedDtoOf(dto, meta.propertyName);
      if (!inner) throw new Error(`no JSON Schema for ${where}: declare the field with @Nested(Dto)`);
      Object.assign(property, bodySchemaOf(inner));
      continue;
    }
    const rule = meta.type === ValidationTypes.CUSTOM_VALIDATION && meta.name ? RULES[meta.name] : undefined;
    if (!rule) throw new Error(`no JSON Schema for ${where}: add the rule to src/validation/json-schema.ts`);
    try {
      const keywords = rule(meta.constraints ?? []);
      // Two rules on one keyword (two patterns, a string and an integer) would be one
      // overwriting the other: a looser schema. JSON Schema has no such field here.
      const clash = Object.keys(keywords).find(
        (keyword) => keyword in property && property[keyword] !== keywords[keyword],
      );
      if (clash) throw new Error(`a second rule for "${clash}" would replace the first`);
      Object.assign(property, keywords);
    } catch (err) {
      throw new Error(`no JSON Schema for ${where}: ${(err as Error).message}`, { cause: err });
    }
  }
  const schema: BodySchema = {
    type: 'object',
    additionalProperties: false,
    required: Object.keys(properties).filter((name) => !omittable.has(name)),
    properties,
  };
  DTOS.set(schema, dto);
  return schema;
}

/** Per DTO class, its fields declared with @Nested and their DTOs. */
const NESTED = new WeakMap<object, Map<string, new () => object>>();

function nestedDtoOf(dto: new () => object, field: string): (new () => object) | undefined {
  for (let c: unknown = dto; typeof c === 'function'; c = Object.getPrototypeOf(c)) {
    const found = NESTED.get(c)?.get(field);
    if (found) return found;
  }
  return undefined;
}

/**
 * A field whose value is an object validated by its own DTO (a JSON object, never an
 * array or null): class-validator's ValidateNested with class-transformer's Type, and
 * the DTO recorded so bodySchemaOf derives the nested schema from it too.
 */
export function Nested(inner: new () => object): PropertyDecorator {
  const validate = ValidateNested();
  const typed = Type(() => inner);
  const object = IsObject();
  return (target, property) => {
    const fields = NESTED.get(target.constructor) ?? new Map<string, new () => object>();
    fields.set(String(property), inner);
    NESTED.set(target.constructor, fields);
    object(target, property);
    typed(target, property);
    validate(target, property);
  };
}
