/** Injection token for the shared ioredis client (commands, scripts, MULTI/EXEC). */
export const REDIS_CLIENT = Symbol('REDIS_CLIENT');
