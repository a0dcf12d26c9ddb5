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
 *
 * A connection never goes on after losing bytes: TCP delivers a connection's bytes
 * in order or resets it, and a Redis client that went on would match later replies
 * to the lost requests. So `drop()` cuts the connection it threw bytes away from,
 * and `heal()` every connection that lost bytes in the partition.
 *
 * `idle()` says when Redis has answered every request sent so far (the proxy counts
 * RESP requests and replies), so a test knows a released write has run.
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
  /** Throws away what was held and cuts its connection (the client sees it drop); passes traffic again. */
  drop(): void;
  /** From now on nothing passes, either way. */
  partition(): void;
  /** Traffic passes again; connections that lost bytes in the partition are cut. */
  heal(): void;
  /**
   * Resolves once Redis has answered every complete request clients sent through the
   * proxy (a released write has run), or their connections are gone.
   */
  idle(): Promise<void>;
  /** Bytes the proxy carried from clients to Redis, for a test to see what was sent. */
  readonly sent: () => string;
  /** Requests (complete RESP values) clients have sent through the proxy so far, held ones included. */
  readonly requests: () => number;
  close(): Promise<void>;
}

interface Pair {
  readonly client: Socket;
  readonly server: Socket;
}

/** Requests a client sent and replies Redis gave on one connection, counted as complete RESP values. */
interface Traffic {
  readonly requests: RespCounter;
  readonly replies: RespCounter;
}

export async function startTcpProxy(target: { host?: string; port: number }): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  let partitioned = false;
  let loseReply: { marker: string; done: () => void } | null = null;
  let holding: { marker: string; pair: Pair | null; chunks: Buffer[]; done: () => void } | null = null;
  let carried = '';
  const counts = new Map<Pair, Traffic>();
  const lostInPartition = new Set<Pair>();
  let idleWaiters: (() => void)[] = [];
  const settle = () => {
    if (idleWaiters.length === 0) return;
    for (const { requests, replies } of counts.values()) if (replies.values < requests.values) return;
    const waiters = idleWaiters;
    idleWaiters = [];
    for (const resolve of waiters) resolve();
  };
  const cut = (pair: Pair) => {
    pair.client.destroy();
    pair.server.destroy();
  };

  const server: Server = createServer((client) => {
    const upstream = new Socket();
    const pair: Pair = { client, server: upstream };
    pairs.add(pair);
    upstream.connect(target.port, target.host ?? '127.0.0.1');
    // A reply expected to be lost: the request that armed it went up on this pair.
    let cutOnReply: (() => void) | null = null;
    // Not a Redis client: a client's every request is a RESP array. The proxy listens on
    // an ephemeral port, which another test's app may have held a moment ago, so a
    // stray client of that app (its health poll: "GET /health HTTP/1.1") can land here.
    // It is hung up on, its bytes neither sent to Redis nor counted.
    let stray: boolean | undefined;

    client.on('data', (data: Buffer) => {
      stray ??= data[0] !== 0x2a;
      if (stray) {
        client.destroy();
        upstream.destroy();
        return;
      }
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
    // Counted apart from the forwarding above, whatever happens to the bytes: a
    // request counts once the client sent it, a reply once Redis did.
    const traffic: Traffic = { requests: new RespCounter(), replies: new RespCounter() };
    counts.set(pair, traffic);
    client.on('data', (data: Buffer) => {
      if (stray) return;
      traffic.requests.feed(data);
      if (partitioned) lostInPartition.add(pair);
    });
    upstream.on('data', (data: Buffer) => {
      traffic.replies.feed(data);
      if (partitioned) lostInPartition.add(pair);
      settle();
    });
    const end = () => {
      pairs.delete(pair);
      counts.delete(pair);
      client.destroy();
      upstream.destroy();
      settle();
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
      const held = holding;
      holding = null;
      if (held?.pair) cut(held.pair);
    },
    partition() {
      partitioned = true;
    },
    heal() {
      partitioned = false;
      for (const pair of lostInPartition) cut(pair);
      lostInPartition.clear();
    },
    idle: () =>
      new Promise<void>((resolve) => {
        idleWaiters.push(resolve);
        settle();
      }),
    sent: () => carried,
    requests: () => [...counts.values()].reduce((n, { requests }) => n + requests.values, 0),
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

/**
 * Counts complete RESP values in a byte stream that arrives in chunks (a request is
 * an array of bulk strings; a reply may nest arrays). Only the bytes of an
 * incomplete value at the end are kept.
 */
class RespCounter {
  values = 0;
  private pending: Buffer = Buffer.alloc(0);

  feed(data: Buffer): void {
    this.pending = this.pending.length === 0 ? data : Buffer.concat([this.pending, data]);
    let at = 0;
    for (let end = valueEnd(this.pending, at); end !== -1; end = valueEnd(this.pending, at)) {
      this.values++;
      at = end;
    }
    this.pending = this.pending.subarray(at);
  }
}

/** Where the RESP value starting at `at` ends, or -1 if `buf` does not hold all of it yet. */
function valueEnd(buf: Buffer, at: number): number {
  if (at >= buf.length) return -1;
  const eol = buf.indexOf('\r\n', at);
  if (eol === -1) return -1;
  const type = String.fromCharCode(buf[at]);
  const size = Number(buf.toString('latin1', at + 1, eol));
  switch (type) {
    case '+':
    case '-':
    case ':':
      return eol + 2;
    case '$':
      // A null bulk string ($-1) has no body.
      if (size < 0) return eol + 2;
      return eol + 2 + size + 2 <= buf.length ? eol + 2 + size + 2 : -1;
    case '*': {
      let end = eol + 2;
      for (let i = 0; i < size && end !== -1; i++) end = valueEnd(buf, end);
      return end;
    }
    default:
      throw new Error(`not RESP: ${JSON.stringify(buf.toString('latin1', at, Math.min(eol, at + 40)))}`);
  }
}
