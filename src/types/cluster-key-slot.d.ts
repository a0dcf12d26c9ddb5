/** cluster-key-slot (ioredis' own dependency) ships no types: the Redis Cluster slot of a key, hash tags honoured. */
declare module 'cluster-key-slot' {
  function calculateSlot(key: string | Buffer): number;
  export = calculateSlot;
}
