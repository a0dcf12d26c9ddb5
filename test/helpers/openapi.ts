import Ajv, { ValidateFunction } from 'ajv';
import * as app from './app';

type Json = Record<string, any>;

export const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/**
 * The OpenAPI document an app serves at /docs-json, to hold the app's answers against:
 * each answer's status must be one its operation declares, and its body valid against
 * that response's schema.
 */
export class OpenApiDocument {
  private readonly ajv = new Ajv({ strict: false, allErrors: true });
  private readonly validators = new Map<string, ValidateFunction>();

  constructor(readonly doc: Json) {}

  static async servedBy(url: string): Promise<OpenApiDocument> {
    const res = await app.request(url, 'GET', '/docs-json');
    if (res.status !== 200) throw new Error(`/docs-json answered ${res.status}`);
    return new OpenApiDocument(res.body);
  }

  /** `{$ref: '#/components/schemas/X'}` replaced by X, everywhere, so ajv sees whole schemas. */
  resolveRefs(node: unknown): any {
    if (Array.isArray(node)) return node.map((item) => this.resolveRefs(item));
    if (typeof node !== 'object' || node === null) return node;
    const { $ref, ...rest } = node as Json;
    if (typeof $ref === 'string') return this.resolveRefs(this.lookup($ref));
    return Object.fromEntries(Object.entries(rest).map(([key, value]) => [key, this.resolveRefs(value)]));
  }

  private lookup(ref: string): unknown {
    if (!ref.startsWith('#/')) throw new Error(`${ref} is not a local reference`);
    const target = ref
      .slice(2)
      .split('/')
      .reduce<any>((at, key) => at?.[key], this.doc);
    if (target === undefined) throw new Error(`${ref} does not resolve`);
    return target;
  }

  /**
   * The document's path for `path`: itself, or the template it fills in
   * (`/api/products/phone`, `/api/products/:id` and `/api/products/{id}` are `/api/products/{id}`).
   */
  private templateOf(method: string, path: string): string | undefined {
    const paths = Object.keys(this.doc.paths).filter((p) => this.doc.paths[p][method] !== undefined);
    const sent = path.split('?')[0].split('/');
    const fills = (template: string) => {
      const parts = template.split('/');
      return (
        parts.length === sent.length &&
        parts.every((part, i) => (/^\{\w+\}$/.test(part) ? sent[i] !== '' : part === sent[i]))
      );
    };
    return paths.find((p) => p === sent.join('/')) ?? paths.find(fills);
  }

  /**
   * Whether `body`, answered with `status` to `route` (`METHOD /path`, the path as sent
   * or as docs/api.md writes it), is what the document says that answer is. A route the
   * document does not list must answer 404 NOT_FOUND, as its description says.
   */
  expectDocumented(route: string, status: number, body: unknown): void {
    const [METHOD, path] = route.split(' ');
    const method = METHOD.toLowerCase();
    expect(METHODS).toContain(method);
    const template = this.templateOf(method, path);
    if (template === undefined) {
      expect({ route, status, code: (body as Json)?.code }).toEqual({ route, status: 404, code: 'NOT_FOUND' });
      this.expectValid(route, status, body, 'ErrorBody', { $ref: '#/components/schemas/ErrorBody' });
      return;
    }
    const response = this.doc.paths[template][method].responses[status];
    expect({ route, status, documented: response !== undefined }).toEqual({ route, status, documented: true });
    const schema = response.content?.['application/json']?.schema;
    if (schema) this.expectValid(route, status, body, `${method} ${template} ${status}`, schema);
  }

  private expectValid(route: string, status: number, body: unknown, key: string, schema: unknown): void {
    let validate = this.validators.get(key);
    if (!validate) this.validators.set(key, (validate = this.ajv.compile(this.resolveRefs(schema))));
    const valid = validate(body);
    expect({ route, status, body, errors: validate.errors ?? null }).toEqual({ route, status, body, errors: null });
    expect(valid).toBe(true);
  }

  /** helpers/app.ts's request, each answer held against the document before it is returned. */
  readonly request = async <T = Json>(...args: Parameters<typeof app.request>): Promise<app.JsonResponse<T>> => {
    const [, method, path] = args;
    const res = await app.request<T>(...args);
    this.expectDocumented(`${method} ${path}`, res.status, res.body);
    return res;
  };
}
