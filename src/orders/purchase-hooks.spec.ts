import Fastify from 'fastify';
import type { Checkout } from './checkout';
import { answerPurchasesInHooks } from './purchase-hooks';

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
