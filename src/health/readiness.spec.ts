import { readiness } from './readiness';
import type { ClusterStatus, MasterStatus } from './redis-status';

const master = (node: string, slots: number, over: Partial<MasterStatus> = {}): MasterStatus => ({
  node,
  status: 'up',
  slots,
  replicas: 1,
  problems: [],
  ...over,
});
const A = master('10.0.0.1:6379', 5461);
const B = master('10.0.0.2:6379', 5462);
const C = master('10.0.0.3:6379', 5461);
const cluster = (masters: MasterStatus[], state = 'ok'): ClusterStatus => ({
  state,
  slotsCovered: masters.reduce((sum, m) => sum + m.slots, 0),
  masters,
});

describe('readiness: one Redis', () => {
  it('is ready exactly when /health says Redis is up', () => {
    expect(readiness({ redis: { redis: 'up', problems: [] }, clientReady: true })).toEqual({
      status: 'ready',
      redis: 'up',
    });
  });

  it('is unavailable when Redis does not answer', () => {
    expect(readiness({ redis: { redis: 'down', problems: [] }, clientReady: false })).toMatchObject({
      status: 'unavailable',
      reason: 'Redis does not answer',
    });
  });

  it.each(['read-only', 'out-of-memory', 'persistence-failing', 'eviction'])(
    'is unavailable when Redis answers but says %s',
    (problem) => {
      expect(readiness({ redis: { redis: 'down', problems: [problem] }, clientReady: true })).toMatchObject({
        status: 'unavailable',
        problems: [problem],
        reason: expect.stringContaining(problem),
      });
    },
  );

  it('is unavailable when fewer than a quorum of Redlock nodes answer, ready again with a quorum', () => {
    const redis = { redis: 'up', problems: [] } as const;
    expect(readiness({ redis, clientReady: true, lockNodes: { up: 1, total: 3, quorum: 2 } })).toMatchObject({
      status: 'unavailable',
      lockNodes: { up: 1 },
    });
    expect(readiness({ redis, clientReady: true, lockNodes: { up: 2, total: 3, quorum: 2 } })).toMatchObject({
      status: 'ready',
    });
  });
});

describe('readiness: a Redis Cluster', () => {
  it('is ready when every master is up and writable', () => {
    const status = cluster([A, B, C]);
    expect(readiness({ redis: { redis: 'up', cluster: status }, clientReady: true })).toEqual({
      status: 'ready',
      redis: 'up',
      cluster: status,
    });
  });

  it('is degraded (200) while the cluster is ok and some masters still take writes, naming the others', () => {
    const down = { ...B, status: 'down' as const };
    const full = { ...C, problems: ['out-of-memory'] };
    expect(readiness({ redis: { redis: 'down', cluster: cluster([A, down, full]) }, clientReady: true })).toMatchObject(
      {
        status: 'degraded',
        unserved: { masters: [B.node, C.node], slots: B.slots + C.slots },
        reason: expect.stringContaining('the rest sell'),
      },
    );
  });

  it('counts slots no master serves (cluster-require-full-coverage no) as unserved', () => {
    const status = cluster([A, B]);
    expect(readiness({ redis: { redis: 'down', cluster: status }, clientReady: true })).toMatchObject({
      status: 'degraded',
      unserved: { masters: [], slots: C.slots },
    });
  });

  it('is unavailable once the cluster says fail: every node refuses every command (CLUSTERDOWN)', () => {
    const status = cluster([A, B, { ...C, status: 'down' }], 'fail');
    expect(readiness({ redis: { redis: 'down', cluster: status }, clientReady: true })).toMatchObject({
      status: 'unavailable',
      reason: expect.stringContaining('cluster_state is fail'),
    });
  });

  it('is unavailable when no node answers, when no master takes a write, or before the client is ready', () => {
    const nobody = { state: 'unknown', slotsCovered: 0, masters: [] };
    expect(readiness({ redis: { redis: 'down', cluster: nobody }, clientReady: true }).status).toBe('unavailable');
    const none = cluster([A, B, C].map((m) => ({ ...m, status: 'down' as const })));
    expect(readiness({ redis: { redis: 'down', cluster: none }, clientReady: true })).toMatchObject({
      status: 'unavailable',
      unserved: { slots: 16_384 },
    });
    expect(readiness({ redis: { redis: 'down', cluster: cluster([A, B, C]) }, clientReady: false })).toMatchObject({
      status: 'unavailable',
      reason: expect.stringContaining('not ready'),
    });
  });
});
