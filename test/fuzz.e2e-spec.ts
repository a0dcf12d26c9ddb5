import { Redis } from 'ioredis';
import { ADMIN_TOKEN, startSale } from './helpers/app';
import { startTestStack, TestStack } from './helpers/stack';

/**
 * Bad input, generated: thousands of requests that are each wrong in at least one
 * way (malformed JSON, wrong types, out-of-range and non-integer numbers, unicode and
 * overlong ids, prototype keys, missing and extra fields, wrong methods, paths and
 * content types, oversize bodies). Every one must get a 4xx with a JSON `code`, none
 * a 5xx, and Redis must be byte-for-byte what it was. The generator is seeded, so a
 * failure names the seed and the case that reproduce it.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20261121);
const CASES = 2_400;
const PARALLEL = 32;

interface Case {
  readonly label: string;
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body?: string;
}

/** mulberry32: a tiny, well-known seeded PRNG. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)];
  return { next, int, pick };
}

type Rng = ReturnType<typeof prng>;

const PRODUCTS = ['phone', 'gone'] as const;

/** Values that are never a valid id. */
const BAD_IDS: readonly unknown[] = [
  '',
  ' ',
  'a b',
  '{phone}',
  'phone:stock',
  'x'.repeat(65),
  'é'.repeat(10),
  '手机',
  '😀',
  'phone\u0000',
  'phone\n',
  '../etc/passwd',
  '*',
  'x'.repeat(5_000),
  0,
  42,
  -1,
  1.5,
  true,
  false,
  null,
  [],
  ['phone'],
  {},
  { $ne: null },
];

/** Values that are never a valid quantity (1..100 integer). */
const BAD_QUANTITIES: readonly unknown[] = [
  0,
  -1,
  -100,
  101,
  1.5,
  0.0001,
  1e21,
  -1e21,
  Number.MAX_SAFE_INTEGER + 2,
  1e308,
  '1',
  '',
  '1e3',
  'NaN',
  'Infinity',
  null,
  true,
  [],
  [1],
  {},
  { valueOf: 1 },
];

const GOOD_USERS = ['alice', 'bob', 'carol_1', 'd-2', 'E_3'];

function randomString(r: Rng, max: number): string {
  const alphabet = 'abc{}[]":,\\/\u0000\u00e9\u624b\ud83d\ude00 \t\n0123456789-_.e+';
  return Array.from({ length: r.int(max) }, () => alphabet[r.int(alphabet.length)]).join('');
}

/** A valid order body, to corrupt. */
function validBody(r: Rng): Record<string, unknown> {
  const body: Record<string, unknown> = { productId: r.pick(PRODUCTS), userId: r.pick(GOOD_USERS) };
  if (r.next() < 0.7) body.quantity = 1 + r.int(2);
  return body;
}

const json = { 'content-type': 'application/json' };

/** One generated request, wrong in at least one way. */
function generate(r: Rng, i: number): Case {
  const post = (label: string, body: string, headers: Record<string, string> = json): Case => ({
    label: `#${i} ${label}`,
    method: 'POST',
    path: '/api/orders',
    headers,
    body,
  });
  const kind = r.int(13);
  switch (kind) {
    case 0: {
      // Malformed JSON: a valid body cut short, or random characters.
      const text = JSON.stringify(validBody(r));
      return r.next() < 0.5
        ? post('truncated JSON', text.slice(0, r.int(text.length)))
        : post('random text', randomString(r, 200));
    }
    case 1: {
      const field = r.pick(['productId', 'userId']);
      const body = { ...validBody(r), [field]: r.pick(BAD_IDS) };
      return post(`bad ${field}`, JSON.stringify(body));
    }
    case 2:
      return post('bad quantity', JSON.stringify({ ...validBody(r), quantity: r.pick(BAD_QUANTITIES) }));
    case 3: {
      // Missing a required field (quantity alone may be missing: it defaults to 1).
      const body = validBody(r);
      delete body[r.pick(['productId', 'userId'])];
      return post('missing field', JSON.stringify(body));
    }
    case 4: {
      const key = r.pick([
        'price',
        'status',
        'orderId',
        'remaining',
        'isAdmin',
        'constructor',
        'prototype',
        'x'.repeat(300),
      ]);
      return post(
        `extra field ${key.slice(0, 20)}`,
        JSON.stringify({ ...validBody(r), [key]: r.pick([0, 'x', null, {}, []]) }),
      );
    }
    case 5: {
      // Prototype pollution attempts, written as raw JSON text (JSON.stringify would drop them).
      const inner = JSON.stringify(validBody(r)).slice(1, -1);
      const attack = r.pick([
        '"__proto__":{"quantity":100}',
        '"__proto__":{"isAdmin":true}',
        '"constructor":{"prototype":{"quantity":100}}',
        '"__proto__":null',
      ]);
      return post('prototype key', `{${inner},${attack}}`);
    }
    case 6: {
      const body = r.pick<unknown>([null, 0, 1, 'phone', true, [], [validBody(r)], [[]], { body: validBody(r) }]);
      return post('not an object', JSON.stringify(body));
    }
    case 7: {
      const type = r.pick([
        'text/plain',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
        'application/xml',
        'application/octet-stream',
        'text/json',
        'application/jsonp',
      ]);
      return post(`content-type ${type}`, JSON.stringify(validBody(r)), { 'content-type': type });
    }
    case 8: {
      const pad = 'x'.repeat(16 * 1024 + r.int(64 * 1024));
      return post('oversize body', JSON.stringify({ ...validBody(r), pad }));
    }
    case 9: {
      const method = r.pick(['GET', 'PUT', 'DELETE', 'PATCH']);
      return {
        label: `#${i} ${method} /api/orders`,
        method,
        path: '/api/orders',
        headers: json,
        body: method === 'GET' ? undefined : JSON.stringify(validBody(r)),
      };
    }
    case 10: {
      const path = r.pick([
        '/api/order',
        '/api/orders/phone',
        '/api/products',
        '/api/products/%zz',
        `/api/products/${'x'.repeat(130)}`,
        '/api/products/a%20b',
        '/',
        '/api',
      ]);
      return {
        label: `#${i} POST ${path.slice(0, 40)}`,
        method: 'POST',
        path,
        headers: json,
        body: JSON.stringify(validBody(r)),
      };
    }
    case 11: {
      // The admin endpoint: no token or a wrong one (it would otherwise reset the sale).
      const auth = r.pick<string | undefined>([
        undefined,
        '',
        'Bearer',
        'Bearer ',
        `Bearer ${ADMIN_TOKEN}x`,
        ADMIN_TOKEN,
        `Basic ${ADMIN_TOKEN}`,
        `bearer ${ADMIN_TOKEN.slice(1)}`,
      ]);
      const headers: Record<string, string> = { ...json, ...(auth === undefined ? {} : { authorization: auth }) };
      return {
        label: `#${i} PUT without the token`,
        method: 'PUT',
        path: `/api/products/${r.pick(PRODUCTS)}`,
        headers,
        body: JSON.stringify({ stock: 1_000_000 }),
      };
    }
    default: {
      // The admin endpoint with the right token and a bad body.
      const body = r.pick<unknown>([
        { stock: -1 },
        { stock: 1.5 },
        { stock: '5' },
        { stock: 1e21 },
        { stock: 5, perUserLimit: 0 },
        { stock: 5, perUserLimit: 101 },
        { stock: 5, extra: 1 },
        {},
        [],
        null,
      ]);
      return {
        label: `#${i} PUT bad sale ${JSON.stringify(body)}`,
        method: 'PUT',
        path: `/api/products/${r.pick(PRODUCTS)}`,
        headers: { ...json, authorization: `Bearer ${ADMIN_TOKEN}` },
        body: JSON.stringify(body),
      };
    }
  }
}

describe(`fuzzed bad input (seed ${SEED}, ${CASES} requests)`, () => {
  let stack: TestStack;
  let client: Redis;

  beforeAll(async () => {
    stack = await startTestStack('fuzz');
    client = stack.client;
    await startSale(stack.url, 'phone', 10, 2);
    await startSale(stack.url, 'gone', 0, 1);
    // Some history that must survive untouched.
    for (const userId of ['alice', 'bob']) {
      const res = await fetch(`${stack.url}/api/orders`, {
        method: 'POST',
        headers: json,
        body: JSON.stringify({ productId: 'phone', userId }),
      });
      expect(res.status).toBe(201);
    }
  });

  afterAll(() => stack?.close());

  /** Every key of the app's, with its full content. */
  /**
   * Every key of the sale, by value. Not the dashboard's `:live` hashes: they count the
   * answers given (a refusal such as LIMIT_REACHED is an answer, and the set-up's own
   * 201s are published a tick later), which is what they are for, not a change to a sale.
   */
  async function dump(): Promise<Record<string, unknown>> {
    const keys = (await client.keys('*')).filter((key) => !key.endsWith(':live')).sort();
    const out: Record<string, unknown> = {};
    for (const key of keys) out[key] = (await client.dumpBuffer(key))?.toString('hex');
    return out;
  }

  it('answers every request with a 4xx and a JSON code, never a 5xx, and changes nothing', async () => {
    const before = await dump();
    const r = prng(SEED);
    const cases = Array.from({ length: CASES }, (_, i) => generate(r, i));
    const seen: Record<string, number> = {};
    const wrong: string[] = [];
    let next = 0;
    const worker = async () => {
      while (next < cases.length) {
        const c = cases[next++];
        const res = await fetch(`${stack.url}${c.path}`, { method: c.method, headers: c.headers, body: c.body });
        const text = await res.text();
        let code: unknown;
        try {
          code = (JSON.parse(text) as { code?: unknown }).code;
        } catch {
          code = undefined;
        }
        seen[`${res.status} ${String(code)}`] = (seen[`${res.status} ${String(code)}`] ?? 0) + 1;
        if (res.status < 400 || res.status >= 500 || typeof code !== 'string' || !/^[A-Z_]+$/.test(code)) {
          wrong.push(`${c.label}: ${res.status} ${text.slice(0, 200)}`);
        }
      }
    };
    await Promise.all(Array.from({ length: PARALLEL }, worker));
    expect(wrong).toEqual([]);
    expect(Object.values(seen).reduce((a, b) => a + b, 0)).toBe(CASES);
    expect(await dump()).toEqual(before);
    // The generator really covers the refusals it means to (not all one kind).
    for (const expected of [
      '400 VALIDATION_FAILED',
      '400 BAD_REQUEST',
      '401 UNAUTHORIZED',
      '404 NOT_FOUND',
      '413 PAYLOAD_TOO_LARGE',
      '415 UNSUPPORTED_MEDIA_TYPE',
    ]) {
      expect(seen[expected]).toBeGreaterThan(20);
    }
  });
});
