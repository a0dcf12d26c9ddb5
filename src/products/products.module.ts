import { Module } from '@nestjs/common';
import { ProductOrders } from './product-orders';
import { ProductsController } from './products.controller';
import { PRODUCTS_CONFIG, ProductsService } from './products.service';

/** products/: the admin's sale set-up and catalog (PUT, GET list and orders, behind the bearer token) and anyone's stock read (GET). */
@Module({
  controllers: [ProductsController],
  providers: [ProductsService, ProductOrders, PRODUCTS_CONFIG.provider],
})
export class ProductsModule {}
