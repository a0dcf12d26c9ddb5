import { Matches } from 'class-validator';
import { ID_PATTERN, ID_RULE } from '../../sale/sale-limits';

export class LiveParamsDto {
  @Matches(ID_PATTERN, { message: `productId ${ID_RULE}` })
  readonly productId!: string;
}
