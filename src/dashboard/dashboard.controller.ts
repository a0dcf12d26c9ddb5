import { Controller, Get, Header } from '@nestjs/common';
import { ApiOperation, ApiProduces, ApiResponse, ApiTags } from '@nestjs/swagger';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The page's files, beside this module (nest-cli.json copies them into dist). */
const PUBLIC = join(__dirname, 'public');
/**
 * Chart.js's self-contained browser build. The package's `exports` name only its
 * module entry points, so the file is found beside the one `require` resolves.
 */
const CHART_JS = join(dirname(require.resolve('chart.js')), 'chart.umd.min.js');

/**
 * GET / : the live sale dashboard. Plain files, read once at start-up and served
 * from memory, and Chart.js from node_modules: no build step and nothing from a CDN.
 */
@ApiTags('dashboard')
@Controller()
export class DashboardController {
  private readonly html = readFileSync(join(PUBLIC, 'index.html'));
  private readonly js = readFileSync(join(PUBLIC, 'dashboard.js'));
  private readonly css = readFileSync(join(PUBLIC, 'dashboard.css'));
  private readonly icon = readFileSync(join(PUBLIC, 'favicon.svg'));
  private readonly chart = readFileSync(CHART_JS);

  @Get()
  @ApiOperation({ summary: 'the live sale dashboard (HTML)' })
  @ApiProduces('text/html')
  @ApiResponse({ status: 200, description: 'the live sale dashboard (HTML)', schema: { type: 'string' } })
  @Header('content-type', 'text/html; charset=utf-8')
  @Header('cache-control', 'no-cache')
  page(): Buffer {
    return this.html;
  }

  @Get('dashboard.js')
  @ApiOperation({ summary: "the dashboard's script" })
  @ApiProduces('text/javascript')
  @ApiResponse({ status: 200, description: "the dashboard's script", schema: { type: 'string' } })
  @Header('content-type', 'text/javascript; charset=utf-8')
  @Header('cache-control', 'no-cache')
  script(): Buffer {
    return this.js;
  }

  @Get('dashboard.css')
  @ApiOperation({ summary: "the dashboard's style sheet" })
  @ApiProduces('text/css')
  @ApiResponse({ status: 200, description: "the dashboard's style sheet", schema: { type: 'string' } })
  @Header('content-type', 'text/css; charset=utf-8')
  @Header('cache-control', 'no-cache')
  style(): Buffer {
    return this.css;
  }

  /**
   * The page names it, and a browser asks for /favicon.ico of any other page of the app
   * it opens (/metrics, /health, an order): without it, a 404 in its console each time.
   */
  @Get('favicon.ico')
  @ApiOperation({ summary: "the dashboard's icon (SVG)" })
  @ApiProduces('image/svg+xml')
  @ApiResponse({ status: 200, description: "the dashboard's icon (SVG)", schema: { type: 'string' } })
  @Header('content-type', 'image/svg+xml')
  @Header('cache-control', 'public, max-age=86400')
  favicon(): Buffer {
    return this.icon;
  }

  @Get('assets/chart.umd.min.js')
  @ApiOperation({ summary: 'Chart.js, served from the installed package' })
  @ApiProduces('text/javascript')
  @ApiResponse({ status: 200, description: 'Chart.js, served from the installed package', schema: { type: 'string' } })
  @Header('content-type', 'text/javascript; charset=utf-8')
  @Header('cache-control', 'public, max-age=86400')
  chartJs(): Buffer {
    return this.chart;
  }
}
