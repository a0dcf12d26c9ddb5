import { LOCK_STRATEGY_NAMES } from '../settings/strategy.config';

const INTEGER = { type: 'integer' } as const;

/** What makes a Redis refuse or lose writes now (src/redis/redis-fitness.ts writeProblems). */
const PROBLEMS = {
  type: 'array',
  items: { type: 'string', enum: ['eviction', 'read-only', 'out-of-memory', 'persistence-failing'] },
  description:
    'why Redis would refuse or lose a write now: `eviction` (maxmemory-policy other than noeviction, without REDIS_ALLOW_EVICTION=1), `read-only` (a replica), `out-of-memory` (maxmemory reached), `persistence-failing` (its last save or AOF write failed)',
} as const;

/** Whether Redis answers and would take a write (redis-status.ts RedisStatus). */
const REDIS = {
  type: 'string',
  enum: ['up', 'refusing', 'down'],
  description:
    '`up`: answers and would take a write; `refusing`: answers, but would refuse or lose a write now (`problems` say why; buyers get 503, nothing written); `down`: does not answer (a cluster: a master, the slot map, or `cluster_state:ok` is missing)',
} as const;

/** Cluster mode: the cluster's own state and every master (redis-status.ts ClusterStatus). */
const CLUSTER = {
  type: 'object',
  description: 'cluster mode only',
  additionalProperties: false,
  required: ['state', 'slotsCovered', 'masters'],
  properties: {
    state: { type: 'string', description: 'cluster_state from CLUSTER INFO' },
    slotsCovered: INTEGER,
    masters: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['node', 'status', 'slots', 'replicas', 'problems'],
        properties: {
          node: { type: 'string' },
          status: { type: 'string', enum: ['up', 'down'] },
          slots: INTEGER,
          replicas: INTEGER,
          problems: PROBLEMS,
        },
      },
    },
  },
} as const;

/** `redlock` only. */
const LOCK_NODES = {
  type: 'object',
  description: '`redlock` only: its independent lock nodes',
  additionalProperties: false,
  required: ['up', 'total', 'quorum'],
  properties: { up: INTEGER, total: INTEGER, quorum: INTEGER },
} as const;

/** The JSON Schema of GET /health's body, 200 and 503 alike (health.controller.ts, redis-status.ts). */
export const HEALTH_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['status', 'redis', 'strategy', 'strategyFamily', 'unsafe', 'lostLocks'],
  properties: {
    status: { type: 'string', enum: ['ok', 'unavailable'] },
    redis: REDIS,
    problems: PROBLEMS,
    cluster: CLUSTER,
    lockNodes: LOCK_NODES,
    strategy: { type: 'string', enum: [...LOCK_STRATEGY_NAMES] },
    strategyFamily: {
      type: 'string',
      description:
        'the strategies this instance sells beside: `lock` (lock, fenced), `lock-free` (atomic, optimistic), else the strategy itself',
    },
    strategyMismatch: {
      type: 'array',
      items: { type: 'string' },
      description:
        'products this instance refused lately (503 STRATEGY_MISMATCH) because instances of another strategy family sell them, the latest first (16 at most)',
    },
    unsafe: { type: 'boolean', description: 'an unsafe strategy, or the fault hook, is on: not for a real sale' },
    faultStopAt: { type: 'string', description: 'the fault hook (FAULT_STOP_AT), when set' },
    lostLocks: { ...INTEGER, description: 'holds found lost since start' },
    settlement: {
      type: 'object',
      description:
        'with DATABASE_URL: settlement into PostgreSQL (docs/settlement.md). `state: "failing"` is degraded, not down: the sale goes on, orders wait in Redis, and settlement catches up once `reason` is mended',
      additionalProperties: false,
      required: ['database', 'state'],
      properties: {
        database: { type: 'string', enum: ['up', 'down'], description: 'whether PostgreSQL answers a probe now' },
        state: {
          type: 'string',
          enum: ['settling', 'failing'],
          description:
            '`failing` whenever this instance cannot settle, whatever the database says: PostgreSQL refuses or is away, its migrations fail, Redis refuses a command settlement sends',
        },
        reason: { type: 'string', description: 'while `failing`: the last error, as the log said it' },
        unsettled: { ...INTEGER, description: "order stream entries not settled yet, every product's" },
        oldestMs: { ...INTEGER, description: "age of the oldest unsettled entry, ms (Redis's clock); 0 when none" },
      },
    },
  },
} as const;

/** The JSON Schema of GET /health/live's body (health.controller.ts). */
export const LIVENESS_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['status'],
  properties: { status: { type: 'string', enum: ['ok'] } },
} as const;

/** The JSON Schema of GET /health/ready's body, 200 and 503 alike (readiness.ts). */
export const READINESS_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['status'],
  properties: {
    status: {
      type: 'string',
      enum: ['ready', 'degraded', 'unavailable', 'draining'],
      description:
        '200: `ready`, or `degraded` (a cluster some of whose masters cannot take a write: their products are refused, the rest sell); 503: `unavailable`, or `draining` (the instance is shutting down)',
    },
    reason: { type: 'string', description: 'why not `ready`, for a person' },
    redis: { ...REDIS, description: "as /health's; absent while draining" },
    problems: PROBLEMS,
    cluster: CLUSTER,
    unserved: {
      type: 'object',
      description: 'cluster mode, when not every master can take a write',
      additionalProperties: false,
      required: ['masters', 'slots'],
      properties: {
        masters: {
          type: 'array',
          items: { type: 'string' },
          description: 'the masters that do not answer, or would refuse or lose a write (`host:port`)',
        },
        slots: { ...INTEGER, description: 'slots (of 16384) that no master able to take a write serves' },
      },
    },
    lockNodes: LOCK_NODES,
  },
} as const;
