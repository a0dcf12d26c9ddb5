import { createServer, Server, Socket } from 'node:net';

/**
 * A TCP proxy between an app and Redis that the fault suite and the tests control:
 * the nemesis, as Jepsen puts one between a client and a database. Every fault is
 * armed on a *named point* of the traffic (the first request whose bytes contain a
 * marker, such as a script's SHA1 or `EXEC`), never on a moment, so a test knows
 * which command it hit.
 *
 * Faults:
 * - `loseReplyTo(marker)`: the request reaches Redis (so the write is applied), its
 *   reply is thrown away and the client's connection is cut: a lost reply.
 * - `holdRequest(marker)`: the request, and what its connection sends after it, is
 *   kept in the proxy (Redis never sees it) until `release()`: a write held in the
 *   network; `drop()` throws it away instead.
 * - `partition()` / `heal()`: every byte both ways is thrown away; new connections
 *   are accepted and go nowhere (a blackhole, not a refusal).
 */
export interface TcpProxy {
  /** redis://127.0.0.1:<port> of the proxy: give it to the app instead of Redis's URL. */
  readonly url: string;
  readonly port: number;
  /** The next request containing `marker` reaches Redis; its reply is dropped and the client cut. */
  loseReplyTo(marker: string): Promise<void>;
  /**
   * The next request containing `marker`, and everything its connection sends after
   * it, is held in the proxy (other connections pass). Resolves once it is held.
   */
  holdRequest(marker: string): Promise<void>;
  /** Sends what was held on to Redis, in order, and passes traffic again. */
  release(): void;
  /** Throws away what was held, and passes traffic again. */
  drop(): void;
  /** From now on nothing passes, either way. */
  partition(): void;
  /** Traffic passes again (connections cut during the partition stay cut). */
  heal(): void;
  /** Bytes the proxy carried from clients to Redis, for a test to see what was sent. */
  readonly sent: () => string;
  close(): Promise<void>;
}

interface Pair {
  readonly client: Socket;
  readonly server: Socket;
}

export async function startTcpProxy(target: { host?: string; port: number }): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  let partitioned = false;
  let loseReply: { marker: string; done: () => void } | null = null;
  let holding: { marker: string; pair: Pair | null; chunks: Buffer[]; done: () => void } | null = null;
  let carried = '';

  const server: Server = createServer((client) => {
    const upstream = new Socket();
    const pair: Pair = { client, server: upstream };
    pairs.add(pair);
    upstream.connect(target.port, target.host ?? '127.0.0.1');
    // A reply expected to be lost: the request that armed it went up on this pair.
    let cutOnReply: (() => void) | null = null;

    client.on('data', (data: Buffer) => {
      if (partitioned) return;
      // Held: the request with the marker, and what its connection sends after it
      // (TCP keeps a connection's bytes in order); other connections pass.
      if (holding && (holding.pair === pair || (holding.pair === null && data.includes(holding.marker)))) {
        holding.chunks.push(data);
        if (holding.pair === null) {
          holding.pair = pair;
          holding.done();
        }
        return;
      }
      if (loseReply && data.includes(loseReply.marker)) {
        const armed = loseReply;
        loseReply = null;
        cutOnReply = () => {
          client.destroy();
          upstream.destroy();
          armed.done();
        };
      }
      carried += data.toString('latin1');
      upstream.write(data);
    });
    upstream.on('data', (data: Buffer) => {
      if (partitioned) return;
      if (cutOnReply) {
        // Redis answered: the command ran. The answer never reaches the client.
        cutOnReply();
        cutOnReply = null;
        return;
      }
      client.write(data);
    });
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;

  const proxy: TcpProxy = {
    url: `redis://127.0.0.1:${port}`,
    port,
    loseReplyTo: (marker) => new Promise<void>((resolve) => (loseReply = { marker, done: resolve })),
    holdRequest: (marker) =>
      new Promise<void>((resolve) => (holding = { marker, pair: null, chunks: [], done: resolve })),
    release() {
      const held = holding;
      holding = null;
      if (!held?.pair || held.pair.server.destroyed) return;
      for (const data of held.chunks) {
        carried += data.toString('latin1');
        held.pair.server.write(data);
      }
    },
    drop() {
      holding = null;
    },
    partition() {
      partitioned = true;
    },
    heal() {
      partitioned = false;
    },
    sent: () => carried,
    close: async () => {
      for (const { client, server: upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return proxy;
}
