import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put, Query, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiErrors } from '../docs/api-errors';
import { component } from '../docs/components';
import { ApiJsonBody, ApiPathParams, ApiQueryParams } from '../docs/dto-decorators';
import { ADMIN_AUTH } from '../docs/openapi';
import { AdminGuard } from '../door/admin.guard';
import { ProductParamsDto } from '../sale/product-params.dto';
import { DeleteProductQueryDto } from './dto/delete-product-query.dto';
import { StartSaleDto } from './dto/start-sale.dto';
import { ListOrdersQueryDto } from './dto/list-orders-query.dto';
import { DEFAULT_PAGE_LIMIT, ListProductsQueryDto } from './dto/list-products-query.dto';
import { ClosedSale, DeletedProduct, OrderPage, Product, ProductBucket, ProductPage } from './product';
import { ProductOrders } from './product-orders';
import {
  CLOSED_SALE_SCHEMA,
  DELETED_PRODUCT_SCHEMA,
  pageSchema,
  PRODUCT_SCHEMA,
  PRODUCT_BUCKET_SCHEMA,
  SETTLED_ORDER_SCHEMA,
} from './product.schema';
import { ProductsService } from './products.service';

const PRODUCT = component('Product', PRODUCT_SCHEMA);
const PRODUCT_BUCKET = component('ProductBucket', PRODUCT_BUCKET_SCHEMA);
const PRODUCT_PAGE = component(
  'ProductPage',
  pageSchema(PRODUCT, "the next page's cursor (opaque: Redis's SSCAN cursor); null after the last page"),
);
const ORDER_PAGE = component(
  'OrderPage',
  pageSchema(
    component('SettledOrder', SETTLED_ORDER_SCHEMA),
    "the next page's cursor (the last order id of this page); null after the last page",
  ),
);
/**
 * What a change of a sale run under the product's exclusion (PurchasePath.exclusive) may
 * answer besides its own refusals: another family's sale, the hold not had, Redis away.
 */
const EXCLUSIVE_ERRORS = [
  'STRATEGY_MISMATCH',
  'LOCK_TIMEOUT',
  'LOCK_EXPIRED',
  'LOCK_NODES_UNAVAILABLE',
  'REDIS_UNAVAILABLE',
  'REDIS_NO_PERMISSION',
];
const DELETED_PRODUCT = component('DeletedProduct', DELETED_PRODUCT_SCHEMA);
const CLOSED_SALE = component('ClosedSale', {
  ...CLOSED_SALE_SCHEMA,
  properties: { ...CLOSED_SALE_SCHEMA.properties, product: PRODUCT },
});

@ApiTags('products')
@Controller('api/products')
export class ProductsController {
  constructor(
    private readonly products: ProductsService,
    private readonly orders: ProductOrders,
  ) {}

  /** Admin: the catalog, a page at a time. */
  @Get()
  @UseGuards(AdminGuard)
  @ApiBearerAuth(ADMIN_AUTH)
  @ApiOperation({
    summary: 'admin: the products listed under this KEY_PREFIX, a page at a time',
    description:
      "one SSCAN of the products set per page (`limit` is its COUNT, a hint), each product as GET /api/products/:id gives it; pass `cursor` back until it is null. Redis's SCAN guarantee: a product listed during the whole walk is returned at least once, maybe twice (dedupe by id); a small set comes whole in one page. A product listed whose sale is gone is left out",
  })
  @ApiQueryParams(ListProductsQueryDto)
  @ApiOkResponse({ description: 'a page of the catalog', schema: PRODUCT_PAGE })
  @ApiErrors('VALIDATION_FAILED', 'URI_TOO_LONG', 'UNAUTHORIZED', 'REDIS_UNAVAILABLE')
  list(@Query() query: ListProductsQueryDto): Promise<ProductPage> {
    return this.products.list(Number(query.limit ?? DEFAULT_PAGE_LIMIT), query.cursor);
  }

  /** Admin: a product's orders as PostgreSQL holds them. */
  @Get(':id/orders')
  @UseGuards(AdminGuard)
  @ApiBearerAuth(ADMIN_AUTH)
  @ApiOperation({
    summary: "admin: a product's orders in PostgreSQL, the system of record, a page at a time",
    description:
      'the orders the settler wrote (an order not yet settled is not listed), by order id, optionally of one status; pass `cursor` back until it is null. Needs settlement on (DATABASE_URL): 501 SETTLEMENT_OFF otherwise',
  })
  @ApiPathParams(ProductParamsDto)
  @ApiQueryParams(ListOrdersQueryDto)
  @ApiOkResponse({ description: "a page of the product's orders", schema: ORDER_PAGE })
  @ApiErrors('VALIDATION_FAILED', 'URI_TOO_LONG', 'UNAUTHORIZED', 'SETTLEMENT_OFF', 'POSTGRES_UNAVAILABLE')
  listOrders(@Param() params: ProductParamsDto, @Query() query: ListOrdersQueryDto): Promise<OrderPage> {
    return this.orders.list(params.id, Number(query.limit ?? DEFAULT_PAGE_LIMIT), query.status, query.cursor);
  }

  /** Admin: start or restart the sale of a product. */
  @Put(':id')
  @UseGuards(AdminGuard)
  @ApiBearerAuth(ADMIN_AUTH)
  @ApiOperation({
    summary: "admin: start or restart a product's sale",
    description:
      "sets the stock and clears the product's buyers, order log, Idempotency-Key outcomes and lock; refuses (409 SALE_HAS_ORDERS) to discard a sale's orders unless `discardOrders` is true, and (503 STRATEGY_MISMATCH) to take over a sale another strategy family sells unless `switchStrategy` is true",
  })
  @ApiPathParams(ProductParamsDto)
  @ApiJsonBody(StartSaleDto)
  @ApiOkResponse({ description: 'the product, its sale just started', schema: PRODUCT })
  @ApiErrors(
    'VALIDATION_FAILED',
    'URI_TOO_LONG',
    'PAYLOAD_TOO_LARGE',
    'UNSUPPORTED_MEDIA_TYPE',
    'UNAUTHORIZED',
    'SALE_HAS_ORDERS',
    'SALE_NOT_SETTLED',
    'SALE_HAS_RESERVATIONS',
    'BUCKETS_FIXED',
    ...EXCLUSIVE_ERRORS,
  )
  startSale(@Param() params: ProductParamsDto, @Body() body: StartSaleDto): Promise<Product> {
    return this.products.startSale(params.id, body.stock, body.perUserLimit, {
      paymentTimeoutMs: body.paymentTimeoutMs,
      discardOrders: body.discardOrders,
      switchStrategy: body.switchStrategy,
      startsAt: body.startsAt,
      endsAt: body.endsAt,
      queue: body.queue,
      buckets: body.buckets,
    });
  }

  /** Admin: end a sale now and settle it, so that a restart discards no order PostgreSQL lacks. */
  @Post(':id/close')
  @HttpCode(200)
  @UseGuards(AdminGuard)
  @ApiBearerAuth(ADMIN_AUTH)
  @ApiOperation({
    summary: "admin: end a product's sale now, cancel its open reservations, and wait for settlement",
    description:
      "ends the sale at once by Redis's clock (endsAt; nothing is sold after, whatever a buyer read before), cancels every reservation still waiting for its payment (its units back in stock once; paid orders stay paid), and, with settlement on, waits up to 10 s for PostgreSQL to hold every order event of the sale (`unsettled`: what was still missing then). A PUT with `discardOrders` then restarts the sale; it refuses (409 SALE_NOT_SETTLED) while anything is unsettled. Closing a closed sale again changes nothing",
  })
  @ApiPathParams(ProductParamsDto)
  @ApiOkResponse({ description: 'the sale, closed', schema: CLOSED_SALE })
  @ApiErrors(
    'VALIDATION_FAILED',
    'URI_TOO_LONG',
    'UNAUTHORIZED',
    'UNKNOWN_PRODUCT',
    'REDIS_UNAVAILABLE',
    'REDIS_OUT_OF_MEMORY',
    'REDIS_READ_ONLY',
    'REDIS_NO_PERMISSION',
    'OUTCOME_UNKNOWN',
  )
  closeSale(@Param() params: ProductParamsDto): Promise<ClosedSale> {
    return this.products.closeSale(params.id);
  }

  /** Admin: retire a product once PostgreSQL holds every order of it. */
  @Delete(':id')
  @UseGuards(AdminGuard)
  @ApiBearerAuth(ADMIN_AUTH)
  @ApiOperation({
    summary: 'admin: retire a product: its Redis keys deleted, its orders kept in PostgreSQL',
    description:
      'refuses (409 ORDERS_UNSETTLED) while PostgreSQL lacks any order event of the product, and (409 RESERVATIONS_OPEN) while an order still waits for its payment (POST /api/products/:id/close cancels them); where orders are not settled at all they exist only in Redis, and go only with `discardOrders=true`. The check and the deletion are one script: a purchase racing the DELETE lands before it (and the DELETE refuses) or finds no product (404 UNKNOWN_PRODUCT). Then the product leaves the catalog (GET /api/products). Its orders stay in PostgreSQL (GET /api/products/:id/orders); a PUT may start a new sale of the same id',
  })
  @ApiPathParams(ProductParamsDto)
  @ApiQueryParams(DeleteProductQueryDto)
  @ApiOkResponse({ description: 'what was removed', schema: DELETED_PRODUCT })
  @ApiErrors(
    'VALIDATION_FAILED',
    'URI_TOO_LONG',
    'UNAUTHORIZED',
    'UNKNOWN_PRODUCT',
    'ORDERS_UNSETTLED',
    'RESERVATIONS_OPEN',
    ...EXCLUSIVE_ERRORS,
  )
  deleteProduct(@Param() params: ProductParamsDto, @Query() query: DeleteProductQueryDto): Promise<DeletedProduct> {
    return this.products.deleteProduct(params.id, {
      discardOrders: query.discardOrders === 'true',
      switchStrategy: query.switchStrategy === 'true',
    });
  }

  /** Admin: each escrow bucket of a product (docs/scaling.md "One product on several shards"). */
  @Get(':id/buckets')
  @UseGuards(AdminGuard)
  @ApiBearerAuth(ADMIN_AUTH)
  @ApiOperation({
    summary: "admin: a product's escrow buckets: each one's slot, share, stock, orders and units in flight",
  })
  @ApiPathParams(ProductParamsDto)
  @ApiOkResponse({ description: 'its buckets, bucket 0 first', schema: { type: 'array', items: PRODUCT_BUCKET } })
  @ApiErrors('VALIDATION_FAILED', 'URI_TOO_LONG', 'UNAUTHORIZED', 'UNKNOWN_PRODUCT', 'REDIS_UNAVAILABLE')
  buckets(@Param() params: ProductParamsDto): Promise<ProductBucket[]> {
    return this.products.buckets(params.id);
  }

  @Get(':id')
  @ApiOperation({ summary: "a product's sale: stock left, units sold, orders" })
  @ApiPathParams(ProductParamsDto)
  @ApiOkResponse({ description: 'the product', schema: PRODUCT })
  @ApiErrors('VALIDATION_FAILED', 'URI_TOO_LONG', 'UNKNOWN_PRODUCT', 'REDIS_UNAVAILABLE')
  get(@Param() params: ProductParamsDto): Promise<Product> {
    return this.products.get(params.id);
  }
}
