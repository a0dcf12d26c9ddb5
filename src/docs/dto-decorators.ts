import { applyDecorators } from '@nestjs/common';
import { ApiBody, ApiParam, ApiQuery } from '@nestjs/swagger';
import { bodySchemaOf } from '../validation/json-schema';
import { component } from './components';

/**
 * The request body is `dto`, documented by the JSON Schema derived from its
 * class-validator decorators (json-schema.ts): the bounds the route enforces, never a copy.
 */
export function ApiJsonBody(dto: new () => object): MethodDecorator {
  return ApiBody({ required: true, schema: component(dto.name, bodySchemaOf(dto)) });
}

/** One path parameter per field of `dto` (`@Param() params: Dto`), each with its derived schema. */
export function ApiPathParams(dto: new () => object): MethodDecorator {
  const { properties } = bodySchemaOf(dto);
  return applyDecorators(
    ...Object.entries(properties).map(([name, schema]) => ApiParam({ name, required: true, schema })),
  );
}

/** One query parameter per field of `dto` (`@Query() query: Dto`), required unless Omittable, each with its derived schema. */
export function ApiQueryParams(dto: new () => object): MethodDecorator {
  const { properties, required } = bodySchemaOf(dto);
  return applyDecorators(
    ...Object.entries(properties).map(([name, schema]) =>
      ApiQuery({ name, required: required.includes(name), schema }),
    ),
  );
}
