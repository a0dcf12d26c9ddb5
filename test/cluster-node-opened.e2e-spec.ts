import { Redis } from 'ioredis';
import { KeyLayout } from '../src/redis/key-layout';
import {
  clusterClient,
  productOnAnotherMaster,
  startTestCluster,
  TestCluster,
  uniquePrefix,
  until,
} from './helpers/redis';

/**
 * untilRun() (src/redis/unrun-retry.ts): a command ioredis refused to send (UNSENT: its
 * node's connection not up) is sent again once the connection to its own slot's node,
 * being opened, is up; refused at once when that node is gone (a master killed: after one
 * try, not NOT_RUN_BUDGET_MS of tries), whatever other node's connection is opening; and
 * however many wait, one pair of listeners on that connection. Held by SIGSTOP: a stopped
 * node's new connection stays 'connect' (TCP accepted by the kernel, its ready check's
 * INFO unanswered).
 */
describe("the cluster client: a dead master's command while another node's connection is opening", () => {
  let cluster: TestCluster;
  afterAll(async () => {
    await cluster?.stop();
  });

  it("fails after one try, without waiting for an unrelated node's connection to come up", async () => {
    // No failover during the test: the slot stays the dead master's.
    cluster = await startTestCluster({ masters: 3, nodeTimeoutMs: 60_000 });
    const { master: victim, key } = await productOnAnotherMaster(cluster, new KeyLayout(uniquePrefix('opened')));
    // Another master: no command of the test is for it.
    const stopped = cluster.nodes.find((n) => n.port !== victim.port)!;
    const own = await clusterClient(cluster);
    try {
      // The other master answers nothing from here on, and the client's connection to it
      // is cut: opened again by the next slot map refresh, it stays 'connect' (its ready
      // check waits) until the command timeout drops it, and is opened again.
      const other = new Redis(stopped.url);
      await other.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
      stopped.pause();
      other.disconnect();
      victim.kill();
      await victim.exited;
      await until(
        'the app to see the dead master go',
        async () => own.nodes('all').every((n) => n.options.port !== victim.port || n.status !== 'ready') || undefined,
      );
      await until(
        "the client's connection to the stopped master to be opening",
        async () =>
          own.nodes('all').some((n) => n.options.port === stopped.port && n.status === 'connect') || undefined,
      );
      let tries = 0;
      const raw = own as unknown as { sendCommand(command: { name: string }, ...rest: unknown[]): unknown };
      const send = raw.sendCommand;
      raw.sendCommand = function (this: unknown, command, ...rest) {
        if (command.name === 'get') tries++;
        return send.call(this, command, ...rest);
      };
      const opening = own.nodes('all').find((n) => n.options.port === stopped.port && n.status === 'connect')!;
      const before = opening.listenerCount('ready');
      const answer = own.get(key).then(String, (err: Error) => `error: ${err.message}`);
      // Refused, and its wait begun, within this turn of the event loop.
      await new Promise((resolve) => setImmediate(resolve));
      // Waiting on the stopped master's connection, it would be sent again once that is up.
      const waitsOnStopped = opening.listenerCount('ready') > before;
      expect({ waitsOnStopped, answer: await answer, tries }).toEqual({
        waitsOnStopped: false,
        answer: 'error: Connection is closed.',
        tries: 1,
      });
    } finally {
      stopped.resume();
      own.disconnect();
    }
  }, 60_000);
});

describe("the cluster client: buyers' commands for a master whose connection is opening", () => {
  let cluster: TestCluster;
  afterAll(async () => {
    await cluster?.stop();
  });

  it('wait for it without piling listeners on its connection (no MaxListenersExceededWarning)', async () => {
    cluster = await startTestCluster({ masters: 3, nodeTimeoutMs: 60_000 });
    const { master, key } = await productOnAnotherMaster(cluster, new KeyLayout(uniquePrefix('listeners')));
    const own = await clusterClient(cluster);
    try {
      // The master's connection is cut and the master stopped: the next refresh opens a
      // new one, which stays 'connect' (its ready check waits) while the node is stopped.
      const other = new Redis(master.url);
      await other.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
      master.pause();
      other.disconnect();
      await until(
        "the client's connection to the stopped master to be opening",
        async () => own.nodes('all').some((n) => n.options.port === master.port && n.status === 'connect') || undefined,
      );
      // A burst of buyers (a sale's in-flight requests): each is refused UNSENT and waits
      // for the connection in nodeOpened, with a 'ready' and an 'end' listener of its own.
      const connection = own.nodes('all').find((n) => n.options.port === master.port && n.status === 'connect')!;
      const before = connection.listenerCount('ready');
      const answers = Array.from({ length: 20 }, () => own.get(key).then(String, (err: Error) => err.message));
      // Each refused, and its wait begun, within this turn of the event loop.
      await new Promise((resolve) => setImmediate(resolve));
      const readyListeners = connection.listenerCount('ready') - before;
      master.resume();
      await Promise.all(answers);
      // Past an emitter's default 10, Node prints "MaxListenersExceededWarning: Possible
      // EventEmitter memory leak detected. 11 ready listeners added to [Commander]" (and
      // the same for 'end'): in a failover under load, on every app instance. (Jest's
      // sandbox does not hand the test its process's 'warning' events: counted instead.)
      expect(readyListeners).toBeLessThanOrEqual(1);
    } finally {
      master.resume();
      own.disconnect();
    }
  }, 60_000);
});
