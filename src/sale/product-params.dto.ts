import { Matches } from 'class-validator';
import { ID_PATTERN, ID_RULE } from './sale-limits';

/** The path parameters of the routes under /api/products/:id: products/, orders/ and door/ take them alike. */
export class ProductParamsDto {
  @Matches(ID_PATTERN, { message: `id ${ID_RULE}` })
  readonly id!: string;
}
