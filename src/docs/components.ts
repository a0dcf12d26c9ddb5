import { isDeepStrictEqual } from 'node:util';
import type { ReferenceObject, SchemaObject } from '@nestjs/swagger';

const SCHEMAS = new Map<string, SchemaObject>();

/**
 * Names `schema` in the document's components and returns the reference to it, so a
 * client generator sees one named type however many routes use it. One name, one schema.
 */
export function component(name: string, schema: object): ReferenceObject {
  const known = SCHEMAS.get(name);
  if (known && !isDeepStrictEqual(known, schema)) throw new Error(`two different schemas are named ${name}`);
  SCHEMAS.set(name, schema as SchemaObject);
  return { $ref: `#/components/schemas/${name}` };
}

/** Every schema component() named: the document's components.schemas. */
export function componentSchemas(): Record<string, SchemaObject> {
  return Object.fromEntries(SCHEMAS);
}
