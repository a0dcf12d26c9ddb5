import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { runLoad } from './load';

describe('runLoad', () => {
  // A stand-in for the app that answers every buyer 409 at once but b1, whom it never
  // answers (autocannon gives up), and b2, whose connection it cuts.
  it('keeps the requests it never heard answered, its own timeouts and lost connections, apart from the answers', async () => {
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        const { userId } = JSON.parse(body) as { userId: string };
        if (userId === 'b1') return;
        if (userId === 'b2') return req.socket.destroy();
        res.writeHead(409, { 'content-type': 'application/json' }).end('{"code":"SOLD_OUT"}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const load = await runLoad({
        url: `http://127.0.0.1:${port}`,
        productId: 'hot',
        buyers: 6,
        duplicates: 0,
        connections: 2,
        quantity: 1,
        timeoutS: 1,
      });
      expect({ sent: load.sent, status: load.status, timeouts: load.timeouts, timeoutMs: load.timeoutMs }).toEqual({
        sent: 6,
        status: { '409': 4 },
        timeouts: 1,
        timeoutMs: 1000,
      });
      expect(load.unheard.map((u) => [u.userId, u.productId]).sort()).toEqual([
        ['b1', 'hot'],
        ['b2', 'hot'],
      ]);
      expect(load.unheard.every((u) => u.sentAt >= load.startedAt)).toBe(true);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
