import Ajv from 'ajv';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { EVERY_ROUTE_ERRORS } from '../src/docs/api-errors';
import { ERROR_CODES } from '../src/errors/errors';
import { CreateOrderDto } from '../src/orders/dto/create-order.dto';
import { CREATE_ORDER_ROUTE_SCHEMA } from '../src/orders/dto/create-order.schema';
import { ProductParamsDto } from '../src/products/dto/product-params.dto';
import { StartSaleDto } from '../src/products/dto/start-sale.dto';
import { bodySchemaOf } from '../src/validation/json-schema';
import { ADMIN_TOKEN, request, startSale, startTestApp } from './helpers/app';
import { uniquePrefix } from './helpers/redis';
import { startTestStack, TestStack } from './helpers/stack';

type Json = Record<string, any>;

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

interface Operation {
  /** `POST /api/orders`, as the README's API table writes it (`:id`, not `{id}`). */
  readonly route: string;
  readonly method: string;
  readonly path: string;
  readonly op: Json;
}

/** A row of the README's API table: its route and the codes its errors column names. */
interface Row {
  readonly route: string;
  readonly codes: string[];
}

const readme = readFileSync(join(__dirname, '..', 'README.md'), 'utf8');
const apiSection = readme.slice(
  readme.indexOf('\n## API\n'),
  readme.indexOf('\n## ', readme.indexOf('\n## API\n') + 1),
);
const codesIn = (text: string): string[] => [...text.matchAll(/`([A-Z][A-Z_]+)`/g)].map((m) => m[1]);

/** Every row whose first cell starts with `METHOD /path`; the errors column is the last. */
function apiTable(): Row[] {
  return [...apiSection.matchAll(/^\| `([A-Z]+ \/[^`\s]*)`.*$/gm)].map(([line, route]) => {
    const cells = line.split(' | ');
    return { route, codes: codesIn(cells[cells.length - 1]) };
  });
}

/** The codes the README says every route can also answer (the paragraph that says so). */
function everyRouteCodes(): string[] {
  const paragraph = apiSection.split(/\n\s*\n/).find((p) => /every route can also answer/.test(p));
  return codesIn(paragraph ?? '');
}

/** `{$ref: '#/components/schemas/X'}` replaced by X, everywhere, so ajv sees whole schemas. */
function resolveRefs(doc: Json, node: unknown): any {
  if (Array.isArray(node)) return node.map((item) => resolveRefs(doc, item));
  if (typeof node !== 'object' || node === null) return node;
  const { $ref, ...rest } = node as Json;
  if (typeof $ref === 'string') return resolveRefs(doc, lookup(doc, $ref));
  return Object.fromEntries(Object.entries(rest).map(([key, value]) => [key, resolveRefs(doc, value)]));
}

function lookup(doc: Json, ref: string): unknown {
  if (!ref.startsWith('#/')) throw new Error(`${ref} is not a local reference`);
  const target = ref
    .slice(2)
    .split('/')
    .reduce<any>((at, key) => at?.[key], doc);
  if (target === undefined) throw new Error(`${ref} does not resolve`);
  return target;
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

describe('OpenAPI at /docs-json, Swagger UI at /docs', () => {
  let stack: TestStack;
  let url: string;
  let doc: Json;
  let operations: Operation[];
  const ajv = new Ajv({ strict: false, allErrors: true });

  beforeAll(async () => {
    stack = await startTestStack('openapi');
    url = stack.url;
    const res = await request(url, 'GET', '/docs-json');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    doc = res.body;
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

  /** Whether `body`, answered with `status` by `route`, is what the document says that answer is. */
  function expectDocumented(route: string, status: number, body: unknown): void {
    const response = operation(route).responses[status];
    expect({ route, status, documented: response !== undefined }).toEqual({ route, status, documented: true });
    const schema = resolveRefs(doc, response.content['application/json'].schema);
    const valid = ajv.validate(schema, body);
    expect({ route, status, body, errors: ajv.errors ?? null }).toEqual({ route, status, body, errors: null });
    expect(valid).toBe(true);
  }

  describe('the document', () => {
    it('is an OpenAPI 3.0 document: info from package.json, every operation answered, every $ref resolving', () => {
      const pkg = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8'));
      expect(doc.openapi).toMatch(/^3\.0\.\d+$/);
      expect(doc.info).toMatchObject({ title: pkg.name, version: pkg.version });
      expect(doc.info.description).toContain(pkg.description);
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
      resolveRefs(doc, doc.paths);
      for (const schema of Object.values<Json>(doc.components.schemas)) ajv.compile(resolveRefs(doc, schema));
    });

    it('is the same for a second app built in the same process (nothing in it is built twice)', async () => {
      const second = await startTestApp({ REDIS_URL: stack.redis.url, KEY_PREFIX: uniquePrefix('openapi-2') });
      try {
        expect((await request(second.url, 'GET', '/docs-json')).body).toEqual(doc);
      } finally {
        await second.close();
      }
    });

    it('lists every route of the README API table, and nothing the table does not', () => {
      const rows = apiTable().map((r) => r.route);
      for (const route of ['PUT /api/products/:id', 'GET /api/products/:id', 'POST /api/orders', 'GET /health']) {
        expect(rows).toContain(route);
      }
      expect(rows).toContain('GET /docs');
      expect(rows).toContain('GET /docs-json');
      expect(new Set(rows).size).toBe(rows.length);
      expect(operations.map((o) => o.route).sort()).toEqual([...rows].sort());
    });

    it('gives each route exactly the error codes of its README row, plus the ones every route can answer', () => {
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
            expectDocumented(route, status, body);
          }
          if (status === 503) expect(response.headers?.['Retry-After']).toBeDefined();
        }
      }
    });

    it('documents each request body by the JSON Schema derived from its DTO, the one the purchase route compiles', () => {
      const bodyOf = (route: string) =>
        resolveRefs(doc, operation(route).requestBody.content['application/json'].schema);
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

    it('declares the admin bearer scheme, applied to the admin route only', () => {
      expect(doc.components.securitySchemes).toEqual({
        admin: expect.objectContaining({ type: 'http', scheme: 'bearer' }),
      });
      expect(doc.security).toBeUndefined();
      const secured = operations.filter((o) => o.op.security !== undefined && o.op.security.length > 0);
      expect(secured.map((o) => o.route)).toEqual(['PUT /api/products/:id']);
      expect(secured[0].op.security).toEqual([{ admin: [] }]);
      expect(allCodes(secured[0].op)).toContain('UNAUTHORIZED');
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
        expectDocumented('GET /docs/:file', 404, res.body);
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
          expectDocumented(o.route, res.status, res.body);
          seen.add(res.body.code);
        }
        expect({ route: o.route, seen: [...seen].sort() }).toEqual({
          route: o.route,
          seen: ['PAYLOAD_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE', 'VALIDATION_FAILED'],
        });
      }
    });

    it('answers a bad or an overlong path parameter, and a missing token, with a code the route lists', async () => {
      for (const o of operations.filter((op) => op.path.includes('{') && op.path.startsWith('/api/'))) {
        const body = o.op.requestBody ? { json: { stock: 1 } } : {};
        for (const id of ['no.dots', 'x'.repeat(65), 'x'.repeat(101)]) {
          const res = await request(url, o.method.toUpperCase(), pathOf(o, id), { ...body, headers: tokenOf(o) });
          expectDocumented(o.route, res.status, res.body);
        }
        if (o.op.security?.length) {
          const res = await request(url, o.method.toUpperCase(), pathOf(o), body);
          expect(res.status).toBe(401);
          expectDocumented(o.route, res.status, res.body);
        }
      }
    });

    it('answers successes and refusals with the bodies the document describes', async () => {
      const put = await request(url, 'PUT', '/api/products/docs-phone', { json: { stock: 1 }, admin: true });
      expectDocumented('PUT /api/products/:id', put.status, put.body);
      const buy = (userId: string) =>
        request(url, 'POST', '/api/orders', { json: { productId: 'docs-phone', userId } });
      const first = await buy('alice');
      expect(first.status).toBe(201);
      expectDocumented('POST /api/orders', 201, first.body);
      for (const res of [await buy('bob'), await buy('alice')]) {
        expect(res.status).toBe(409);
        expectDocumented('POST /api/orders', 409, res.body);
      }
      await startSale(url, 'docs-phone', 5);
      const get = await request(url, 'GET', '/api/products/docs-phone');
      expect(get.status).toBe(200);
      expectDocumented('GET /api/products/:id', 200, get.body);
      const unknown = await request(url, 'GET', '/api/products/no-sale-here');
      expectDocumented('GET /api/products/:id', unknown.status, unknown.body);
      const health = await request(url, 'GET', '/health');
      expectDocumented('GET /health', 200, health.body);
      for (const probe of ['/health/live', '/health/ready']) {
        const res = await request(url, 'GET', probe);
        expect(res.status).toBe(200);
        expectDocumented(`GET ${probe}`, 200, res.body);
      }
    });
  });
});
