import Fastify from 'fastify';
import type { Checkout } from './checkout';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { answerPurchasesInHooks, purchaseLeftToTheRoute } from './orders.controller';

describe('answerPurchasesInHooks', () => {
  // Never called here: the hooks are only installed, no request is served.
  const checkout = {} as Checkout;

  it('refuses to start when a purchase route is missing (its hook would answer nothing)', async () => {
    const fastify = Fastify();
    answerPurchasesInHooks(fastify, checkout);
    fastify.post('/api/orders', () => 'buy');
    await expect(fastify.ready()).rejects.toThrow(/POST \/api\/products\/:id\/orders is not registered/);
    await fastify.close();
  });

  it('starts once both routes are registered', async () => {
    const fastify = Fastify();
    answerPurchasesInHooks(fastify, checkout);
    const own = () => undefined;
    fastify.post('/api/orders', { preHandler: own }, () => 'buy');
    fastify.post('/api/products/:id/orders', () => 'buy');
    await expect(fastify.ready()).resolves.toBeDefined();
    await fastify.close();
  });
});

describe('purchaseLeftToTheRoute', () => {
  const bought: unknown[][] = [];
  // Records what it is asked to buy: the line and keys are the point here, not Redis.
  const checkout = {
    buy: (...args: unknown[]) => Promise.resolve(bought.push(args.slice(0, 3))),
  } as unknown as Checkout;
  const request = (url: string, extra: object = {}) =>
    ({
      method: 'POST',
      routeOptions: { url },
      headers: { 'idempotency-key': ['a', 'b'] },
      ...extra,
    }) as unknown as FastifyRequest;
  const reply = {} as FastifyReply;

  it("throws what the hook's purchase failed with, and buys nothing", () => {
    const failure = new Error('from the hook');
    expect(() =>
      purchaseLeftToTheRoute(checkout, request('/api/orders', { purchaseFailure: { error: failure } }), reply, {
        body: {},
      }),
    ).toThrow(failure);
    expect(bought).toEqual([]);
  });

  it("buys from what the pipes gave, by the route's one declaration", async () => {
    await purchaseLeftToTheRoute(checkout, request('/api/products/:id/orders'), reply, {
      params: { id: 'phone' },
      body: { userId: 'u1', quantity: 1 },
    });
    await purchaseLeftToTheRoute(checkout, request('/api/orders'), reply, {
      body: { productId: 'tv', userId: 'u2', quantity: 2 },
    });
    expect(bought).toEqual([
      [{ productId: 'phone', userId: 'u1', quantity: 1 }, 'a, b', undefined],
      [{ productId: 'tv', userId: 'u2', quantity: 2 }, 'a, b', undefined],
    ]);
  });

  it('refuses a route with no purchase declared', () => {
    expect(() => purchaseLeftToTheRoute(checkout, request('/api/elsewhere'), reply, { body: {} })).toThrow(
      /POST \/api\/elsewhere: no purchase is declared/,
    );
  });
});
