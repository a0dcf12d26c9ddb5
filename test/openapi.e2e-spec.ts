import Ajv from 'ajv';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EVERY_ROUTE_ERRORS } from '../src/docs/api-errors';
import { ERROR_CODES } from '../src/errors/errors';
import { CreateOrderDto } from '../src/orders/dto/create-order.dto';
import { CREATE_ORDER_ROUTE_SCHEMA } from '../src/orders/dto/create-order.schema';
import { ProductParamsDto } from '../src/sale/product-params.dto';
import { StartSaleDto } from '../src/products/dto/start-sale.dto';
import { bodySchemaOf } from '../src/validation/json-schema';
import { ADMIN_TOKEN, request, startSale, startTestApp } from './helpers/app';
import { uniquePrefix } from './helpers/redis';
import { METHODS, OpenApiDocument } from './helpers/openapi';
import { startTestStack, TestStack } from './helpers/stack';

type Json = Record<string, any>;

interface Operation {
  /** `POST /api/orders`, as docs/api.md's route table writes it (`:id`, not `{id}`). */
  readonly route: string;
  readonly method: string;
  readonly path: string;
  readonly op: Json;
}

/** A row of docs/api.md's route table: its route and the codes its errors column names. */
interface Row {
  readonly route: string;
  readonly codes: string[];
}

const apiPage = readFileSync(join(__dirname, '..', 'docs', 'api.md'), 'utf8');
const codesIn = (text: string): string[] => [...text.matchAll(/`([A-Z][A-Z_]+)`/g)].map((m) => m[1]);

/** Every row whose first cell starts with `METHOD /path`; the errors column is the last. */
function apiTable(): Row[] {
  return [...apiPage.matchAll(/^\| `([A-Z]+ \/[^`\s]*)`.*$/gm)].map(([line, route]) => {
    const cells = line.split(' | ');
    return { route, codes: codesIn(cells[cells.length - 1]) };
  });
}

/** The codes docs/api.md says every route can also answer (the paragraph that says so). */
function everyRouteCodes(): string[] {
  const paragraph = apiPage.split(/\n\s*\n/).find((p) => /every route can also answer/.test(p));
  return codesIn(paragraph ?? '');
}

/** The codes an operation's error responses name (each response's `code` enum), by status. */
function errorCodes(op: Json): Map<number, string[]> {
  const byStatus = new Map<number, string[]>();
  for (const [status, response] of Object.entries<Json>(op.responses)) {
    const codes = response.content?.['application/json']?.schema?.properties?.code?.enum;
    if (codes) byStatus.set(Number(status), codes);
  }
  return byStatus;
}

const allCodes = (op: Json): string[] => [...errorCodes(op).values()].flat();

const REDOCLY = join(__dirname, '..', 'node_modules', '@redocly', 'cli', 'bin', 'cli.js');

/**
 * The Redocly CLI's lint of `doc` by its `recommended` rules: its totals and each
 * problem as one line. Run offline (no telemetry, no update check) in a directory of
 * its own, so it reads no redocly.yaml or .env of ours.
 */
function redoclyLint(doc: Json): { totals: Json; problems: string[] } {
  const dir = mkdtempSync(join(tmpdir(), 'seckill-redocly-'));
  try {
    writeFileSync(join(dir, 'openapi.json'), JSON.stringify(doc, null, 2));
    const run = spawnSync(
      process.execPath,
      [REDOCLY, 'lint', '--extends=recommended', '--format=json', '--max-problems=1000', 'openapi.json'],
      {
        cwd: dir,
        encoding: 'utf8',
        timeout: 60_000,
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
      },
    );
    if (run.error) throw run.error;
    if (!run.stdout.startsWith('{')) throw new Error(`redocly lint said no JSON: ${run.stdout}${run.stderr}`);
    const { totals, problems } = JSON.parse(run.stdout) as { totals: Json; problems: Json[] };
    return {
      totals,
      problems: problems.map((p) => `${p.severity} ${p.ruleId} at ${p.location?.[0]?.pointer}: ${p.message}`),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('OpenAPI at /docs-json, Swagger UI at /docs', () => {
  let stack: TestStack;
  let url: string;
  let doc: Json;
  let operations: Operation[];
  let openapi: OpenApiDocument;

  beforeAll(async () => {
    stack = await startTestStack('openapi');
    url = stack.url;
    const res = await request(url, 'GET', '/docs-json');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    doc = res.body;
    openapi = new OpenApiDocument(doc);
    operations = Object.entries<Json>(doc.paths).flatMap(([path, item]) =>
      METHODS.filter((method) => item[method]).map((method) => ({
        route: `${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`,
        method,
        path,
        op: item[method],
      })),
    );
  });

  afterAll(() => stack?.close());

  const operation = (route: string): Json => {
    const found = operations.find((o) => o.route === route);
    if (!found) throw new Error(`the document has no ${route}`);
    return found.op;
  };

  describe('the document', () => {
    it('is an OpenAPI 3.0 document: info from package.json, every operation answered, every $ref resolving', () => {
      const pkg = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8'));
      expect(doc.openapi).toMatch(/^3\.0\.\d+$/);
      expect(doc.info).toMatchObject({ title: pkg.name, version: pkg.version });
      expect(doc.info.description).toContain(pkg.description);
      expect(doc.info.license).toMatchObject({ name: pkg.license });
      // Relative: the app that serves the document, wherever it listens.
      expect(doc.servers).toEqual([expect.objectContaining({ url: '/' })]);
      expect(operations.length).toBeGreaterThan(0);
      const ids = new Set<string>();
      for (const { route, path, op } of operations) {
        expect(path).toMatch(/^\//);
        expect(typeof op.operationId).toBe('string');
        expect(ids.has(op.operationId)).toBe(false);
        ids.add(op.operationId);
        const statuses = Object.keys(op.responses);
        expect({ route, statuses: statuses.filter((s) => !/^[1-5]\d\d$/.test(s)) }).toEqual({ route, statuses: [] });
        for (const response of Object.values<Json>(op.responses)) expect(typeof response.description).toBe('string');
        // Each {param} of the path is a declared path parameter, and nothing else is.
        const templated = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
        const declared = (op.parameters ?? []).filter((p: Json) => p.in === 'path');
        expect({ route, params: declared.map((p: Json) => p.name).sort() }).toEqual({ route, params: templated });
        for (const p of op.parameters ?? []) {
          expect(['path', 'query', 'header', 'cookie']).toContain(p.in);
          expect(p.schema).toBeDefined();
          if (p.in === 'path') expect(p.required).toBe(true);
        }
      }
      // Throws on any reference that does not resolve.
      openapi.resolveRefs(doc.paths);
      const ajv = new Ajv({ strict: false });
      for (const schema of Object.values<Json>(doc.components.schemas)) ajv.compile(openapi.resolveRefs(schema));
    });

    it("passes the Redocly CLI's recommended rules with 0 errors and 0 warnings", () => {
      const { totals, problems } = redoclyLint(doc);
      expect({ problems, totals }).toEqual({
        problems: [],
        totals: expect.objectContaining({ errors: 0, warnings: 0 }),
      });
    });

    it('is the same for a second app built in the same process (nothing in it is built twice)', async () => {
      const second = await startTestApp({ REDIS_URL: stack.redis.url, KEY_PREFIX: uniquePrefix('openapi-2') });
      try {
        expect((await request(second.url, 'GET', '/docs-json')).body).toEqual(doc);
      } finally {
        await second.close();
      }
    });

    it('lists every route of the docs/api.md route table, and nothing the table does not', () => {
      const rows = apiTable().map((r) => r.route);
      for (const route of ['PUT /api/products/:id', 'GET /api/products/:id', 'POST /api/orders', 'GET /health']) {
        expect(rows).toContain(route);
      }
      expect(rows).toContain('GET /docs');
      expect(rows).toContain('GET /docs-json');
      expect(new Set(rows).size).toBe(rows.length);
      expect(operations.map((o) => o.route).sort()).toEqual([...rows].sort());
    });

    it('gives each route exactly the error codes of its docs/api.md row, plus the ones every route can answer', () => {
      expect(everyRouteCodes().sort()).toEqual([...EVERY_ROUTE_ERRORS].sort());
      for (const { route, codes } of apiTable()) {
        for (const code of codes)
          expect({ route, code, known: ERROR_CODES.has(code) }).toEqual({ route, code, known: true });
        const expected = [...new Set([...codes, ...EVERY_ROUTE_ERRORS])].sort();
        expect({ route, codes: allCodes(operation(route)).sort() }).toEqual({ route, codes: expected });
      }
    });

    it('lists every code of the error table somewhere, each under its own status', () => {
      const listed = new Set(operations.flatMap((o) => allCodes(o.op)));
      expect([...listed].sort()).toEqual([...ERROR_CODES.keys()].sort());
      for (const { route, op } of operations) {
        for (const [status, codes] of errorCodes(op)) {
          for (const code of codes) {
            expect({ route, code, status }).toEqual({ route, code, status: ERROR_CODES.get(code)?.status });
          }
        }
      }
    });

    it("gives each code an example body with that code's message, valid against its response's schema", () => {
      for (const { route, op } of operations) {
        for (const [status, codes] of errorCodes(op)) {
          const response = op.responses[status];
          const examples = response.content['application/json'].examples;
          expect(Object.keys(examples)).toEqual(codes);
          for (const code of codes) {
            const body = examples[code].value;
            expect(body).toMatchObject({ statusCode: status, code, message: expect.any(String) });
            openapi.expectDocumented(route, status, body);
          }
          if (status === 503) expect(response.headers?.['Retry-After']).toBeDefined();
        }
      }
    });

    it('documents each request body by the JSON Schema derived from its DTO, the one the purchase route compiles', () => {
      const bodyOf = (route: string) =>
        openapi.resolveRefs(operation(route).requestBody.content['application/json'].schema);
      expect(bodyOf('POST /api/orders')).toEqual(bodySchemaOf(CreateOrderDto));
      expect(bodyOf('POST /api/orders')).toEqual(CREATE_ORDER_ROUTE_SCHEMA.body);
      expect(bodyOf('PUT /api/products/:id')).toEqual(bodySchemaOf(StartSaleDto));
      expect(operation('POST /api/orders').requestBody.required).toBe(true);
      // The bounds the DTOs enforce, as a reader of the document sees them.
      expect(bodyOf('POST /api/orders').properties.quantity).toEqual({ type: 'integer', minimum: 1, maximum: 100 });
      expect(bodyOf('PUT /api/products/:id').required).toEqual(['stock']);
      for (const route of ['PUT /api/products/:id', 'GET /api/products/:id']) {
        const id = operation(route).parameters.find((p: Json) => p.name === 'id');
        expect(id).toMatchObject({ in: 'path', required: true, schema: bodySchemaOf(ProductParamsDto).properties.id });
      }
    });

    it('declares the Idempotency-Key request header and the Idempotent-Replayed and Retry-After answers', () => {
      const buy = operation('POST /api/orders');
      expect(buy.parameters).toContainEqual(
        expect.objectContaining({ name: 'Idempotency-Key', in: 'header', required: false }),
      );
      expect(buy.responses[201].headers['Idempotent-Replayed'].schema).toEqual({ type: 'string', enum: ['true'] });
      expect(operation('GET /health').responses[503].headers['Retry-After']).toBeDefined();
      expect(operation('GET /health/ready').responses[503].headers['Retry-After']).toBeDefined();
    });

    it('says of each probe, explicitly, that it needs no credentials (security: [])', () => {
      for (const route of ['GET /health/live', 'GET /health/ready']) {
        expect({ route, security: operation(route).security }).toEqual({ route, security: [] });
      }
    });

    it("declares the admin bearer scheme on the admin routes, the payment provider's signature (or the admin) on the payment callback, every other route public (security: [])", () => {
      expect(doc.components.securitySchemes).toEqual({
        admin: expect.objectContaining({ type: 'http', scheme: 'bearer' }),
        paymentSignature: expect.objectContaining({ type: 'apiKey', in: 'header', name: 'Payment-Signature' }),
      });
      expect(doc.security).toBeUndefined();
      const secured = operations.filter((o) => o.op.security !== undefined && o.op.security.length > 0);
      expect(Object.fromEntries(secured.map((o) => [o.route, o.op.security]))).toEqual({
        'PUT /api/products/:id': [{ admin: [] }],
        'POST /api/products/:id/close': [{ admin: [] }],
        'DELETE /api/products/:id': [{ admin: [] }],
        'GET /api/products': [{ admin: [] }],
        'GET /api/products/:id/orders': [{ admin: [] }],
        'GET /api/products/:id/buckets': [{ admin: [] }],
        // Either one: a list of requirements is an OR.
        'POST /api/orders/:orderId/pay': expect.arrayContaining([{ admin: [] }, { paymentSignature: [] }]),
      });
      for (const { route, op } of operations.filter((o) => !secured.includes(o))) {
        expect({ route, security: op.security }).toEqual({ route, security: [] });
      }
      for (const { route, op } of secured) {
        const code = route.endsWith('/pay') ? 'PAYMENT_SIGNATURE_INVALID' : 'UNAUTHORIZED';
        expect({ route, codes: allCodes(op) }).toEqual({ route, codes: expect.arrayContaining([code]) });
      }
    });

    it('with BUYER_AUTH, declares the buyer bearer scheme on every route that then asks for a buyer token', async () => {
      const buyers = await startTestApp({
        REDIS_URL: stack.redis.url,
        KEY_PREFIX: uniquePrefix('openapi-buyers'),
        BUYER_AUTH: 'hs256:b7Rk2pQx9LmZ4tWv0cHs6NdJ3fYg8aUe',
        BUYER_AUTH_ISSUER: 'https://id.test.example/',
        BUYER_AUTH_AUDIENCE: 'seckill',
      });
      try {
        const secured: Json = (await request(buyers.url, 'GET', '/docs-json')).body;
        expect(secured.components.securitySchemes).toEqual({
          admin: doc.components.securitySchemes.admin,
          paymentSignature: doc.components.securitySchemes.paymentSignature,
          buyer: expect.objectContaining({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' }),
        });
        const securityOf = Object.entries<Json>(secured.paths).flatMap(([path, item]) =>
          METHODS.filter((method) => item[method]).map((method) => [
            `${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`,
            item[method].security,
          ]),
        );
        const buyerRoutes = [
          'GET /api/orders/:orderId',
          'GET /api/products/:id/queue/:ticket',
          'POST /api/orders',
          'POST /api/orders/:orderId/cancel',
          'POST /api/products/:id/orders',
          'POST /api/products/:id/queue',
        ];
        // The admin's and the payment provider's routes as without BUYER_AUTH.
        const others = Object.fromEntries(
          operations.filter((o) => o.op.security.length > 0).map((o) => [o.route, o.op.security]),
        );
        for (const [route, security] of securityOf) {
          const expected = buyerRoutes.includes(route) ? [{ buyer: [] }] : (others[route] ?? []);
          expect({ route, security }).toEqual({ route, security: expected });
        }
        expect(securityOf.filter(([, security]) => security.length > 0)).toHaveLength(
          buyerRoutes.length + Object.keys(others).length,
        );
        // Apart from the scheme, the document is the one without BUYER_AUTH.
        expect({ ...secured, components: {}, paths: {} }).toEqual({ ...doc, components: {}, paths: {} });
        const { totals, problems } = redoclyLint(secured);
        expect({ problems, totals }).toEqual({
          problems: [],
          totals: expect.objectContaining({ errors: 0, warnings: 0 }),
        });
      } finally {
        await buyers.close();
      }
    });
  });

  describe('Swagger UI', () => {
    it('serves /docs as HTML whose scripts, styles and icons are all local and load', async () => {
      for (const page of ['/docs', '/docs/']) {
        const res = await fetch(`${url}${page}`);
        expect(res.status).toBe(200);
        expect(res.headers.get('content-type')).toMatch(/^text\/html/);
        const html = await res.text();
        const assets = [...html.matchAll(/<(?:script|link)\b[^>]*\b(?:src|href)=["']([^"']+)["']/g)].map((m) => m[1]);
        expect(assets).toEqual(
          expect.arrayContaining([
            expect.stringMatching(/swagger-ui-bundle\.js$/),
            expect.stringMatching(/swagger-ui\.css$/),
          ]),
        );
        for (const asset of assets) {
          // No scheme, no host: nothing from a CDN.
          expect(asset).not.toMatch(/^([a-z]+:)?\/\//i);
          const loaded = await fetch(new URL(asset, `${url}${page}`));
          expect({ asset, status: loaded.status }).toEqual({ asset, status: 200 });
          await loaded.arrayBuffer();
        }
      }
    });

    it('answers a missing file under /docs with our 404 NOT_FOUND body', async () => {
      for (const path of [
        '/docs/nothing.js',
        '/docs/LICENSE',
        '/docs/..%2fpackage.json',
        '/docs/%2e%2e/package.json',
      ]) {
        const res = await request(url, 'GET', path);
        expect(res.status).toBe(404);
        expect(res.body).toMatchObject({ statusCode: 404, code: 'NOT_FOUND' });
        openapi.expectDocumented('GET /docs/:file', 404, res.body);
      }
    });
  });

  describe('the document against the running app', () => {
    /** The route's path with each parameter filled in. */
    const pathOf = (o: Operation, value = 'docs-probe') => o.path.replace(/\{\w+\}/g, value);
    const tokenOf = (o: Operation): Record<string, string> =>
      o.op.security?.length ? { authorization: `Bearer ${ADMIN_TOKEN}` } : {};

    it('answers a bad body, malformed JSON, another media type and a body over 16 KiB with a code the route lists', async () => {
      const bodyRoutes = operations.filter((o) => o.op.requestBody);
      expect(bodyRoutes.map((o) => o.route)).toEqual(
        expect.arrayContaining(['POST /api/orders', 'PUT /api/products/:id']),
      );
      const json = { 'content-type': 'application/json' };
      const sends: [string, { raw: string; headers: Record<string, string> }][] = [
        ['an empty object', { raw: '{}', headers: json }],
        ['a field of the wrong type', { raw: '{"stock":"1","productId":1}', headers: json }],
        ['malformed JSON', { raw: '{"stock":', headers: json }],
        ['text/plain', { raw: 'stock=1', headers: { 'content-type': 'text/plain' } }],
        ['a body over 16 KiB', { raw: JSON.stringify({ pad: 'x'.repeat(17 * 1024) }), headers: json }],
      ];
      for (const o of bodyRoutes) {
        const seen = new Set<string>();
        for (const [, { raw, headers }] of sends) {
          const res = await request(url, o.method.toUpperCase(), pathOf(o), {
            raw,
            headers: { ...headers, ...tokenOf(o) },
          });
          openapi.expectDocumented(o.route, res.status, res.body);
          seen.add(res.body.code);
        }
        expect({ route: o.route, seen: [...seen].sort() }).toEqual({
          route: o.route,
          seen: ['BAD_REQUEST', 'PAYLOAD_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE', 'VALIDATION_FAILED'],
        });
      }
    });

    it('answers a bad or an overlong path parameter, and a missing token, with a code the route lists', async () => {
      for (const o of operations.filter((op) => op.path.includes('{') && op.path.startsWith('/api/'))) {
        const body = o.op.requestBody ? { json: { stock: 1 } } : {};
        for (const id of ['no.dots', 'x'.repeat(65), 'x'.repeat(101)]) {
          const res = await request(url, o.method.toUpperCase(), pathOf(o, id), { ...body, headers: tokenOf(o) });
          openapi.expectDocumented(o.route, res.status, res.body);
        }
        if (o.op.security?.length) {
          const res = await request(url, o.method.toUpperCase(), pathOf(o), body);
          expect(res.status).toBe(401);
          openapi.expectDocumented(o.route, res.status, res.body);
        }
      }
    });

    it('answers successes and refusals with the bodies the document describes', async () => {
      const put = await request(url, 'PUT', '/api/products/docs-phone', { json: { stock: 1 }, admin: true });
      openapi.expectDocumented('PUT /api/products/:id', put.status, put.body);
      const buy = (userId: string) =>
        request(url, 'POST', '/api/orders', { json: { productId: 'docs-phone', userId } });
      const first = await buy('alice');
      expect(first.status).toBe(201);
      openapi.expectDocumented('POST /api/orders', 201, first.body);
      for (const res of [await buy('bob'), await buy('alice')]) {
        expect(res.status).toBe(409);
        openapi.expectDocumented('POST /api/orders', 409, res.body);
      }
      await startSale(url, 'docs-phone', 5);
      const get = await request(url, 'GET', '/api/products/docs-phone');
      expect(get.status).toBe(200);
      openapi.expectDocumented('GET /api/products/:id', 200, get.body);
      const unknown = await request(url, 'GET', '/api/products/no-sale-here');
      openapi.expectDocumented('GET /api/products/:id', unknown.status, unknown.body);
      const health = await request(url, 'GET', '/health');
      openapi.expectDocumented('GET /health', 200, health.body);
      const live = await request(url, 'GET', '/api/live');
      expect(live.body.products).toContainEqual(expect.objectContaining({ productId: 'docs-phone' }));
      openapi.expectDocumented('GET /api/live', 200, live.body);
      for (const probe of ['/health/live', '/health/ready']) {
        const res = await request(url, 'GET', probe);
        expect(res.status).toBe(200);
        openapi.expectDocumented(`GET ${probe}`, 200, res.body);
      }
    });
  });
});
