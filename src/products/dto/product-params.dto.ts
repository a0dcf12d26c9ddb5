import { Matches } from 'class-validator';
import { ID_PATTERN, ID_RULE } from '../../sale/sale-limits';

export class ProductParamsDto {
  @Matches(ID_PATTERN, { message: `id ${ID_RULE}` })
  readonly id!: string;
}
