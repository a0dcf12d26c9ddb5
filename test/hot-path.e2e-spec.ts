import { ValidationPipe } from '@nestjs/common';
import { errorBody } from '../src/errors/error-body';
import { SoldOutError } from '../src/errors/errors';
import { Checkout } from '../src/orders/checkout';
import { StrictValidationPipe } from '../src/validation/strict-validation.pipe';
import { request, startSale } from './helpers/app';
import { startTestStack, TestStack } from './helpers/stack';

/**
 * POST /api/orders' compiled path: the route's JSON Schema (derived from CreateOrderDto)
 * takes a valid body without class-validator, a refused one still gets class-validator's
 * 400, and the 201 and 409 bodies come out of compiled serializers byte for byte as
 * JSON.stringify wrote them.
 */
describe('POST /api/orders hot path', () => {
  let stack: TestStack;
  let classValidator: jest.SpyInstance;

  beforeAll(async () => {
    stack = await startTestStack('hot-path');
  });
  afterAll(() => stack?.close());
  beforeEach(() => {
    classValidator = jest.spyOn(ValidationPipe.prototype, 'transform');
  });
  afterEach(() => classValidator.mockRestore());

  const raw = async (body: string) => {
    const res = await fetch(`${stack.url}/api/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
  };

  it('takes a valid body without running class-validator, and writes the 201 field by field', async () => {
    await startSale(stack.url, 'fast', 2);
    classValidator.mockClear(); // the admin route's own validation
    const res = await raw('{"productId":"fast","userId":"u1"}');
    expect(res.status).toBe(201);
    const order = JSON.parse(res.text);
    expect(res.text).toBe(
      JSON.stringify({
        orderId: order.orderId,
        productId: 'fast',
        userId: 'u1',
        quantity: 1,
        remaining: 1,
        status: 'reserved',
      }),
    );
    expect(classValidator).not.toHaveBeenCalled();
  });

  it('answers the 409 with the bytes ErrorFilter would write', async () => {
    await startSale(stack.url, 'gone', 0);
    classValidator.mockClear(); // the admin route's own validation
    const res = await raw('{"productId":"gone","userId":"u1","quantity":1}');
    expect(res.status).toBe(409);
    expect(res.type).toBe('application/json; charset=utf-8');
    expect(res.text).toBe(JSON.stringify(errorBody(new SoldOutError('gone'))));
    expect(classValidator).not.toHaveBeenCalled();
  });

  // Fastify's ajv defaults would coerce "2" to 2 and drop the unknown field, and the
  // schema would then pass a body class-validator refuses (fails without STRICT_AJV).
  it.each([
    ['a quantity as a string', '{"productId":"strict","userId":"u1","quantity":"2"}', 'quantity'],
    ['an unknown field', '{"productId":"strict","userId":"u1","extra":1}', 'extra'],
    ['a field named after Object.prototype', '{"productId":"strict","userId":"u1","toString":"x"}', 'toString'],
    ['null for the omittable quantity', '{"productId":"strict","userId":"u1","quantity":null}', 'quantity'],
  ])("refuses %s with class-validator's 400 and changes nothing", async (_what, body, field) => {
    await startSale(stack.url, 'strict', 5);
    classValidator.mockClear(); // the admin route's own validation
    const k = stack.keys.product('strict');
    const res = await raw(body);
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text)).toMatchObject({ statusCode: 400, code: 'VALIDATION_FAILED', errors: [{ field }] });
    expect(await stack.client.get(k.stock)).toBe('5');
    expect(await stack.client.xlen(k.orders)).toBe(0);
  });

  it('lists a key named after an Object.prototype member after the fields class-validator refuses', async () => {
    const res = await raw('{"productId":"strict","userId":"u1","quantity":"2","toString":"x"}');
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text)).toEqual({
      statusCode: 400,
      code: 'VALIDATION_FAILED',
      message: 'quantity must be an integer number; property toString should not exist',
      errors: [
        { field: 'quantity', messages: ['quantity must be an integer number'] },
        { field: 'toString', messages: ['property toString should not exist'] },
      ],
    });
  });

  it("answers a purchase on either route from the route's hook, without Nest's pipeline; a failure goes to the route and is not bought twice", async () => {
    await startSale(stack.url, 'hooked', 2);
    const pipe = jest.spyOn(StrictValidationPipe.prototype, 'transform');
    const buy = jest.spyOn(Checkout.prototype, 'buy');
    try {
      const answers = [
        await request(stack.url, 'POST', '/api/orders', { json: { productId: 'hooked', userId: 'u1' } }),
        await request(stack.url, 'POST', '/api/products/hooked/orders', { json: { userId: 'u2' } }),
        // Refused by Redis with a 409: answered by the hook too.
        await request(stack.url, 'POST', '/api/products/hooked/orders', { json: { userId: 'u3' } }),
      ];
      expect(answers.map((a) => [a.status, a.body.code ?? a.body.remaining])).toEqual([
        [201, 1],
        [201, 0],
        [409, 'SOLD_OUT'],
      ]);
      expect(answers[1].body).toMatchObject({ productId: 'hooked', userId: 'u2', quantity: 1 });
      // Nest's pipe runs on every request its handler serves (the body, the URL's id).
      expect(pipe).not.toHaveBeenCalled();
      expect(buy).toHaveBeenCalledTimes(3);

      // Not a 409: the route answers what the hook's purchase got, through Nest's filter.
      buy.mockClear();
      const unknown = await request(stack.url, 'POST', '/api/products/nothing/orders', { json: { userId: 'u1' } });
      expect([unknown.status, unknown.body.code]).toEqual([404, 'UNKNOWN_PRODUCT']);
      expect(pipe).toHaveBeenCalled();
      expect(buy).toHaveBeenCalledTimes(1);
    } finally {
      pipe.mockRestore();
      buy.mockRestore();
    }
    expect(await stack.client.xlen(stack.keys.product('hooked').orders)).toBe(2);
  });

  it('answers a purchase that failed with nothing to show for it once, as a 500, and does not buy again', async () => {
    await startSale(stack.url, 'nothing-thrown', 1);
    // A rejection without a reason: the route must still see that its hook tried.
    const buy = jest.spyOn(Checkout.prototype, 'buy').mockRejectedValueOnce(undefined);
    try {
      const res = await request(stack.url, 'POST', '/api/orders', {
        json: { productId: 'nothing-thrown', userId: 'u1' },
      });
      expect([res.status, res.body.code]).toEqual([500, 'INTERNAL_ERROR']);
      expect(buy).toHaveBeenCalledTimes(1);
    } finally {
      buy.mockRestore();
    }
    expect(await stack.client.xlen(stack.keys.product('nothing-thrown').orders)).toBe(0);
  });

  it('still serves an Idempotency-Key retry through the same route', async () => {
    await startSale(stack.url, 'keyed', 3);
    const first = await request(stack.url, 'POST', '/api/orders', {
      json: { productId: 'keyed', userId: 'u1' },
      headers: { 'idempotency-key': 'k-1' },
    });
    const again = await request(stack.url, 'POST', '/api/orders', {
      json: { productId: 'keyed', userId: 'u1' },
      headers: { 'idempotency-key': 'k-1' },
    });
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
  });
});
