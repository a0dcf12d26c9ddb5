import { IsInt, Max, Min, ValidateIf } from 'class-validator';

export const MAX_STOCK = 10_000_000;
export const MAX_PER_USER_LIMIT = 100;

/** Body of PUT /api/products/:id. */
export class StartSaleDto {
  @IsInt()
  @Min(0)
  @Max(MAX_STOCK)
  readonly stock!: number;

  /** Units one user may buy in this sale. Omitted means 1; null is refused, not defaulted. */
  @ValidateIf((_dto, value) => value !== undefined)
  @IsInt()
  @Min(1)
  @Max(MAX_PER_USER_LIMIT)
  readonly perUserLimit: number = 1;
}
