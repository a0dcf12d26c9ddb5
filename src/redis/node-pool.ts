import type { Cluster } from 'ioredis';

/** A cluster client's connection to one node, as far as this module uses it (ioredis' typings say less). */
interface NodeConnection {
  /** Commands written and not answered yet, oldest first (its `denque`). */
  readonly commandQueue: { toArray(): { readonly command: SentCommand }[] };
  readonly options: { readOnly?: boolean };
  sendCommand(command: SentCommand, stream?: unknown): unknown;
}

/** An ioredis Command, as far as this module reads it. */
interface SentCommand {
  /** Resolved or rejected: by its reply, or by its timeout (COMMAND_TIMEOUT_MS) before any. */
  readonly isSettled: boolean;
  readonly promise: Promise<unknown>;
}

/** What keepNodesAnswering() changes of ioredis' cluster connection pool (not in its typings either). */
interface NodePool {
  readonly nodes: {
    readonly all: Record<string, NodeConnection>;
    readonly master: Record<string, NodeConnection>;
    readonly slave: Record<string, NodeConnection>;
  };
  reset(nodes: { host: string; port: number; readOnly?: boolean }[]): void;
}

/**
 * Two rules for a cluster client's connections to its nodes, so that what a node holds
 * while a graceful failover hands its slots over (its clients' writes, paused, then each
 * answered MOVED once it is a replica) is answered as the node answers it:
 *
 * 1. A node with a command in flight that is still waiting for its answer stays in the
 *    pool. ioredis drops the connection to a node that serves no slot in a slot map it
 *    relearns (every SLOTS_REFRESH_MS, and after any MOVED) at once, and every command
 *    still in flight on it would fail "Connection is closed." (a write as cut mid-flight,
 *    OUTCOME_UNKNOWN; a read as Redis out of reach), though the node was about to answer.
 *    It stays as a replica, which scaleReads 'master' sends no buyer's command to, until
 *    a later refresh finds none of its commands waiting: once each is answered, or
 *    rejected by its timeout (a node paused or cut off answers nothing).
 * 2. A command already settled is never sent. ioredis follows a MOVED that comes after
 *    the command's timeout rejected it (OUTCOME_UNKNOWN, answered to the buyer), and
 *    would run it on the new master seconds late: a write no one waits for any more.
 */
export function keepNodesAnswering(cluster: Cluster): void {
  const guarded = new WeakSet<NodeConnection>();
  const guard = (node: NodeConnection) => {
    if (guarded.has(node)) return;
    guarded.add(node);
    const send = node.sendCommand.bind(node);
    // Commands sent alone only: a pipeline's (sent with its `stream`) go as one write.
    node.sendCommand = (command, stream) =>
      stream === undefined && command.isSettled ? command.promise : send(command, stream);
  };
  // The seed nodes' connections exist already (made as the client was created).
  for (const node of cluster.nodes('all')) guard(node as unknown as NodeConnection);
  cluster.on('+node', guard);

  const pool = (cluster as unknown as { connectionPool: NodePool }).connectionPool;
  const reset = pool.reset.bind(pool);
  pool.reset = (nodes) => {
    // Not the client's own close (an empty list: every node goes), nor its first map.
    if (nodes.length === 0 || cluster.status !== 'ready') return reset(nodes);
    const listed = new Set(nodes.map((n) => `${n.host}:${n.port}`));
    const waiting = Object.entries(pool.nodes.all).filter(
      ([key, node]) => !listed.has(key) && node.commandQueue.toArray().some(({ command }) => !command.isSettled),
    );
    // Kept as a replica, its role changed here: put back as one, ioredis would send it
    // READONLY, a command of its own behind the held ones that would keep it longer.
    for (const [key, node] of waiting) {
      node.options.readOnly = true;
      delete pool.nodes.master[key];
      pool.nodes.slave[key] = node;
    }
    reset([...nodes, ...waiting.map(([key]) => ({ ...hostPort(key), readOnly: true }))]);
  };
}

function hostPort(key: string): { host: string; port: number } {
  const at = key.lastIndexOf(':');
  return { host: key.slice(0, at), port: Number(key.slice(at + 1)) };
}
