import { Body, Controller, Get, Param, Put, UseGuards } from '@nestjs/common';
import { AdminGuard } from './admin.guard';
import { ProductParamsDto } from './dto/product-params.dto';
import { StartSaleDto } from './dto/start-sale.dto';
import { Product } from './product';
import { ProductsService } from './products.service';

@Controller('api/products')
export class ProductsController {
  constructor(private readonly products: ProductsService) {}

  /** Admin: start or restart the sale of a product. */
  @Put(':id')
  @UseGuards(AdminGuard)
  startSale(@Param() params: ProductParamsDto, @Body() body: StartSaleDto): Promise<Product> {
    return this.products.startSale(params.id, body.stock, body.perUserLimit);
  }

  @Get(':id')
  get(@Param() params: ProductParamsDto): Promise<Product> {
    return this.products.get(params.id);
  }
}
