import { Matches } from 'class-validator';

/** Product and user ids: short, URL- and key-safe (no braces, so the hash tag stays ours). */
export const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
export const ID_RULE = 'must be 1-64 characters of A-Z a-z 0-9 _ -';

export class ProductParamsDto {
  @Matches(ID_PATTERN, { message: `id ${ID_RULE}` })
  readonly id!: string;
}
