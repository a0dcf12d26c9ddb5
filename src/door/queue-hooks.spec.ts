import Fastify from 'fastify';
import { answerQueueInHooks } from './queue-hooks';
import { DoorRefusals } from './door-refusals';
import type { WaitingRoom } from './waiting-room';

describe('answerQueueInHooks', () => {
  // Never called here: the hooks are only installed, no request is served.
  const room = {} as WaitingRoom;

  it("refuses to start when a waiting room's route is missing (its hook would answer nothing)", async () => {
    const fastify = Fastify();
    answerQueueInHooks(fastify, room, new DoorRefusals());
    fastify.post('/api/products/:id/queue', () => 'join');
    await expect(fastify.ready()).rejects.toThrow(/\/api\/products\/:id\/queue\/:ticket is not registered/);
    await fastify.close();
  });

  it('starts once both routes are registered', async () => {
    const fastify = Fastify();
    answerQueueInHooks(fastify, room, new DoorRefusals());
    const own = () => undefined;
    fastify.post('/api/products/:id/queue', { preHandler: own }, () => 'join');
    fastify.get('/api/products/:id/queue/:ticket', () => 'read');
    await expect(fastify.ready()).resolves.toBeDefined();
    await fastify.close();
  });
});
