import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import {
  DocumentBuilder,
  OpenAPIObject,
  OperationObject,
  PathItemObject,
  SecuritySchemeObject,
  SwaggerModule,
} from '@nestjs/swagger';
import { ERROR_CODES_EXTENSION, EVERY_ROUTE_ERRORS } from './api-errors';
import { componentSchemas } from './components';
import { errorResponses } from './error-responses';

/** The Swagger UI's path; the document is at `/${DOCS_PATH}-json`. */
export const DOCS_PATH = 'docs';

/** The security scheme of the admin route: `Authorization: Bearer <ADMIN_TOKEN>`. */
export const ADMIN_AUTH = 'admin';

/** The payment provider's signed callback (src/door/payment-signature.ts): `Payment-Signature`. */
export const PAYMENT_AUTH = 'paymentSignature';
/** With BUYER_AUTH, the scheme of the door's routes: `Authorization: Bearer <the buyer's JWT>`. */
export const BUYER_AUTH = 'buyer';

/**
 * The routes SwaggerModule serves, which no controller declares: listed so the
 * document covers every route the app answers. New objects for each document, which
 * gets its error responses added in place.
 */
const docsRoutes = (): Record<string, PathItemObject> => ({
  [`/${DOCS_PATH}`]: {
    get: {
      operationId: 'docs_ui',
      tags: [DOCS_PATH],
      summary: 'this document in Swagger UI',
      responses: { 200: { description: 'the Swagger UI page', content: { 'text/html': {} } } },
    },
  },
  [`/${DOCS_PATH}-json`]: {
    get: {
      operationId: 'docs_json',
      tags: [DOCS_PATH],
      summary: 'this document (OpenAPI 3.0)',
      responses: { 200: { description: 'the OpenAPI document', content: { 'application/json': {} } } },
    },
  },
  [`/${DOCS_PATH}/{file}`]: {
    get: Object.assign(
      {
        operationId: 'docs_asset',
        tags: [DOCS_PATH],
        summary: "Swagger UI's assets, from the installed swagger-ui-dist",
        parameters: [{ name: 'file', in: 'path' as const, required: true, schema: { type: 'string' } }],
        responses: { 200: { description: 'the file' } },
      },
      { [ERROR_CODES_EXTENSION]: ['NOT_FOUND'] },
    ),
  },
});

/**
 * Who may call what, as the parts that decide it say (handed in by the app shell, so the
 * document knows no door): BUYER_AUTH's settings, the routes its buyer token guards
 * (door-routes.ts), and the payment callback's signature scheme (payment-signature.ts).
 */
export interface ApiSecurity {
  /** BUYER_AUTH's setting: whether buyer routes take a bearer token (null: they do not). */
  readonly buyerAuth: { readonly issuer: string; readonly audience: string } | null;
  /** `METHOD /path` with `:` parameters. */
  readonly isBuyerRoute: (method: string, path: string) => boolean;
  readonly paymentScheme: SecuritySchemeObject;
}

/**
 * Serves the OpenAPI document of every route at `/docs-json` and Swagger UI at `/docs`
 * (its assets from the installed swagger-ui-dist, never a CDN). Call before app.init():
 * the static assets are a Fastify plugin, registered only before the server starts.
 */
export function setupOpenApi(app: INestApplication, security: ApiSecurity): OpenAPIObject {
  const document = openApiDocument(app, security);
  SwaggerModule.setup(DOCS_PATH, app, document, {
    jsonDocumentUrl: `${DOCS_PATH}-json`,
    raw: ['json'],
    customSiteTitle: `${document.info.title} API`,
    // The UI renders the document it is given; it sends nothing to swagger.io's validator.
    swaggerOptions: { validatorUrl: null },
  });
  return document;
}

/**
 * The document Nest's scanner makes of the controllers, with the docs' own routes
 * added and each operation's error codes (ApiErrors, plus EVERY_ROUTE_ERRORS) made
 * into one response per status. Every operation says who may call it: the admin
 * scheme (ApiBearerAuth), the payment provider's signature or the admin (the payment
 * callback), with BUYER_AUTH the buyer scheme on the door's routes (the ones the door
 * asks a buyer token of: door-routes.ts), or, everywhere else, no one in particular
 * (`security: []`).
 */
function openApiDocument(
  app: INestApplication,
  { buyerAuth, isBuyerRoute, paymentScheme }: ApiSecurity,
): OpenAPIObject {
  const { name, description, version, license } = packageJson();
  const builder = new DocumentBuilder()
    .setTitle(name)
    .setDescription(
      `${description}\n\nEvery error answers \`{statusCode, code, message}\`; each operation lists the codes it ` +
        'can answer, grouped by status, with an example body each. A path or method not listed here answers 404 `NOT_FOUND`. ' +
        'Every answer carries `X-Request-Id`; the log lines written while serving the request carry it as `reqId`.',
    )
    .setVersion(version)
    // package.json's license is an SPDX id; its SPDX page is the text.
    .setLicense(license, `https://spdx.org/licenses/${license}.html`)
    // Relative: the API is on the host that serves this document, whatever its address.
    .addServer('/', 'this app, where the document is served')
    .addBearerAuth(
      // Not a JWT (DocumentBuilder's default format): an opaque shared secret.
      {
        type: 'http',
        scheme: 'bearer',
        bearerFormat: 'ADMIN_TOKEN',
        description: 'the ADMIN_TOKEN (`npm start` prints it)',
      },
      ADMIN_AUTH,
    )
    .addApiKey(paymentScheme, PAYMENT_AUTH);
  if (buyerAuth) {
    builder.addBearerAuth(
      {
        type: 'http',
        scheme: 'bearer',
        bearerFormat: 'JWT',
        description: `BUYER_AUTH: a buyer token from the sale's identity provider, a JWT issued by ${buyerAuth.issuer} for ${buyerAuth.audience}, whose \`sub\` is the buyer`,
      },
      BUYER_AUTH,
    );
  }
  const document = SwaggerModule.createDocument(app, builder.build());
  document.paths = { ...document.paths, ...docsRoutes() };
  for (const [path, item] of Object.entries(document.paths)) {
    for (const [method, operation] of operationsOf(item)) {
      addErrorResponses(operation);
      if (buyerAuth && isBuyerRoute(method.toUpperCase(), path.replace(/\{(\w+)\}/g, ':$1'))) {
        operation.security = [{ [BUYER_AUTH]: [] }];
      }
      operation.security ??= [];
    }
  }
  document.components = { ...document.components, schemas: { ...document.components?.schemas, ...componentSchemas() } };
  return document;
}

function operationsOf(item: PathItemObject): [string, OperationObject][] {
  const methods = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;
  return methods.flatMap((method): [string, OperationObject][] => {
    const operation = item[method];
    return operation === undefined ? [] : [[method, operation]];
  });
}

function addErrorResponses(operation: OperationObject): void {
  const record = operation as OperationObject & Record<string, unknown>;
  const declared = (record[ERROR_CODES_EXTENSION] as string[] | undefined) ?? [];
  delete record[ERROR_CODES_EXTENSION];
  const errors = errorResponses([...declared, ...EVERY_ROUTE_ERRORS]);
  const clash = Object.keys(errors).find((status) => status in operation.responses);
  if (clash) throw new Error(`${operation.operationId ?? operation.summary}: ${clash} is both an answer and an error`);
  operation.responses = { ...operation.responses, ...errors };
}

interface PackageJson {
  readonly name: string;
  readonly description: string;
  readonly version: string;
  readonly license: string;
}

/** The package's own package.json, from src/docs (tests) or dist/src/docs (the built app, the image). */
function packageJson(): PackageJson {
  for (let dir = __dirname; dirname(dir) !== dir; dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as PackageJson;
  }
  throw new Error(`no package.json above ${__dirname}`);
}
