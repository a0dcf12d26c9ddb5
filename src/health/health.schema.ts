import { LOCK_STRATEGY_NAMES } from '../config/app-config';

const INTEGER = { type: 'integer' } as const;

/** The JSON Schema of GET /health's body, 200 and 503 alike (health.controller.ts, redis-status.ts). */
export const HEALTH_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['status', 'redis', 'strategy', 'unsafe', 'lostLocks'],
  properties: {
    status: { type: 'string', enum: ['ok', 'unavailable'] },
    redis: { type: 'string', enum: ['up', 'down'] },
    cluster: {
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
            required: ['node', 'status', 'slots', 'replicas'],
            properties: {
              node: { type: 'string' },
              status: { type: 'string', enum: ['up', 'down'] },
              slots: INTEGER,
              replicas: INTEGER,
            },
          },
        },
      },
    },
    lockNodes: {
      type: 'object',
      description: '`redlock` only: its independent lock nodes',
      additionalProperties: false,
      required: ['up', 'total', 'quorum'],
      properties: { up: INTEGER, total: INTEGER, quorum: INTEGER },
    },
    strategy: { type: 'string', enum: [...LOCK_STRATEGY_NAMES] },
    unsafe: { type: 'boolean', description: 'an unsafe strategy, or the fault hook, is on: not for a real sale' },
    faultStopAt: { type: 'string', description: 'the fault hook (FAULT_STOP_AT), when set' },
    lostLocks: { ...INTEGER, description: 'holds found lost since start' },
  },
} as const;
