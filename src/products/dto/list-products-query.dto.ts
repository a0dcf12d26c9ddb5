import { Matches } from 'class-validator';
import { Omittable } from '../../validation/omittable';

/** 1..500 in decimal: a page's size (SSCAN's COUNT); a query string is text, so a pattern, not IsInt. */
export const PAGE_LIMIT_PATTERN = /^(?:[1-9][0-9]?|[1-4][0-9][0-9]|500)$/;
export const PAGE_LIMIT_RULE = 'must be an integer from 1 to 500';
/** Products or orders a page asks for when `limit` is left out. */
export const DEFAULT_PAGE_LIMIT = 100;

/** Query of GET /api/products. */
export class ListProductsQueryDto {
  /**
   * Where the last page stopped: its `cursor`, opaque (Redis's SSCAN cursor). Omitted:
   * from the start. At most 19 digits, so never past Redis's unsigned 64-bit cursor.
   */
  @Omittable()
  @Matches(/^(?:0|[1-9][0-9]{0,18})$/, { message: 'cursor must be the cursor a page of GET /api/products answered' })
  readonly cursor?: string;

  /** About how many products to read for this page (SSCAN's COUNT, a hint: see docs/api.md). */
  @Omittable()
  @Matches(PAGE_LIMIT_PATTERN, { message: `limit ${PAGE_LIMIT_RULE}` })
  readonly limit?: string;
}
