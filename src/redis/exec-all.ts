import type { ChainableCommander } from 'ioredis';

/**
 * EXEC a MULTI (or a pipeline) and return its replies, throwing the first command
 * error instead of leaving [err, value] pairs for every caller to unpack. MULTI/EXEC
 * never rolls back: a command that errors at run time does not undo the others, so
 * callers only queue commands that cannot fail on well-formed keys.
 */
export async function execAll(batch: ChainableCommander): Promise<unknown[]> {
  const replies = await batch.exec();
  // exec() resolves null only when a WATCHed key changed; none of our batches WATCH.
  if (replies === null) throw new Error('EXEC aborted: a watched key changed');
  return replies.map(([err, value]) => {
    if (err) throw err;
    return value;
  });
}
