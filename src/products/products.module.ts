import { Module } from '@nestjs/common';
import { ProductsController } from './products.controller';
import { PRODUCTS_CONFIG, ProductsService } from './products.service';

/** products/: the admin's sale set-up (PUT, behind the bearer token) and anyone's stock read (GET). */
@Module({
  controllers: [ProductsController],
  providers: [ProductsService, PRODUCTS_CONFIG.provider],
})
export class ProductsModule {}
