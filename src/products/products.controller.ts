import { Body, Controller, Get, Param, Put, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiErrors } from '../docs/api-errors';
import { component } from '../docs/components';
import { ApiJsonBody, ApiPathParams } from '../docs/dto-decorators';
import { ADMIN_AUTH } from '../docs/openapi';
import { AdminGuard } from './admin.guard';
import { ProductParamsDto } from './dto/product-params.dto';
import { StartSaleDto } from './dto/start-sale.dto';
import { Product } from './product';
import { PRODUCT_SCHEMA } from './product.schema';
import { ProductsService } from './products.service';

const PRODUCT = component('Product', PRODUCT_SCHEMA);

@ApiTags('products')
@Controller('api/products')
export class ProductsController {
  constructor(private readonly products: ProductsService) {}

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
    'STRATEGY_MISMATCH',
    'LOCK_TIMEOUT',
    'LOCK_EXPIRED',
    'LOCK_NODES_UNAVAILABLE',
    'REDIS_UNAVAILABLE',
  )
  startSale(@Param() params: ProductParamsDto, @Body() body: StartSaleDto): Promise<Product> {
    return this.products.startSale(params.id, body.stock, body.perUserLimit, {
      paymentTimeoutMs: body.paymentTimeoutMs,
      discardOrders: body.discardOrders,
      switchStrategy: body.switchStrategy,
      startsAt: body.startsAt,
      endsAt: body.endsAt,
      queue: body.queue,
    });
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
