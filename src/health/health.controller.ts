import { BeforeApplicationShutdown, Controller, Get, HttpStatus, Inject, Optional, Res } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Cluster } from 'ioredis';
import type { RedisClient } from '../redis/create-client';
import { REDIS_CONFIG } from '../redis/redis.config';
import { SETTLEMENT_CONFIG } from '../settlement/settlement.config';
import { LESSONS_CONFIG } from '../settings/lessons.config';
import { ConfigsOf, configView } from '../settings/setting';
import { STRATEGY_CONFIG, strategyFamily, UNSAFE_STRATEGIES } from '../settings/strategy.config';
import { component } from '../docs/components';
import { PurchasePath } from '../orders/purchases/purchase-path';
import { StrategyMismatches } from '../orders/strategy-mismatches';
import { REDIS_CLIENT } from '../redis/redis.constants';
import { SettlementLag } from '../settlement/settlement-lag';
import { Settler } from '../settlement/settler';
import { HEALTH_SCHEMA, LIVENESS_SCHEMA, READINESS_SCHEMA } from './health.schema';
import { Readiness, readiness } from './readiness';
import { redisStatus, RedisStatus } from './redis-status';

const HEALTH = component('Health', HEALTH_SCHEMA);
const LIVENESS = component('Liveness', LIVENESS_SCHEMA);
const READINESS = component('Readiness', READINESS_SCHEMA);
const DRAINING: Readiness = {
  status: 'draining',
  reason: 'the instance is shutting down: it finishes the requests it has, then exits',
};
const RETRY_AFTER = {
  'Retry-After': { description: 'seconds to wait before asking again', schema: { type: 'integer' } },
} as const;

/** What /health reports: the strategy, whether it settles, eviction and the fault switches. */
export const HEALTH_CONFIG = configView('health', STRATEGY_CONFIG, SETTLEMENT_CONFIG, REDIS_CONFIG, LESSONS_CONFIG);

/**
 * On a cluster, how long one look at every master (CLUSTER SHARDS, CLUSTER INFO, an
 * INFO per master) answers /health: a probe, a dashboard and a curious client asking
 * at once, or a client asking in a loop, cost the cluster one fan-out per second.
 */
export const CLUSTER_STATUS_TTL_MS = 1_000;

/**
 * GET /health (what the instance sees, one status for everything), and the two probes
 * an orchestrator asks apart: /health/live (restart me?) and /health/ready (send me
 * buyers?). docs/deployment.md says which to wire where.
 */
@ApiTags('health')
@Controller('health')
export class HealthController implements BeforeApplicationShutdown {
  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    @Inject(HEALTH_CONFIG.token) private readonly config: ConfigsOf<typeof HEALTH_CONFIG.sections>,
    private readonly purchases: PurchasePath,
    private readonly mismatches: StrategyMismatches,
    private readonly settlementLag: SettlementLag,
    @Optional() private readonly settler?: Settler,
  ) {}

  private settlementLook?: { readonly at: number; readonly state: Promise<Record<string, unknown> | undefined> };

  /**
   * With DATABASE_URL: PostgreSQL's state, whether this instance settles (the settler's
   * own last error, whatever the database answers a probe: a Redis user that may not
   * read the group fails settlement while PostgreSQL is up) and the lag, looked at once
   * a second at most.
   */
  private settlement(): Promise<Record<string, unknown> | undefined> {
    if (!this.config.databaseUrl) return Promise.resolve(undefined);
    const now = performance.now();
    if (!this.settlementLook || now - this.settlementLook.at >= CLUSTER_STATUS_TTL_MS) {
      const state = (async () => {
        const database = await this.settlementLag.database();
        const failing = this.settler?.status().failing ?? null;
        const said = {
          database,
          ...(failing !== null ? { state: 'failing', reason: failing } : { state: 'settling' }),
        };
        try {
          const products = await this.settlementLag.lag();
          return {
            ...said,
            unsettled: products.reduce((sum, p) => sum + p.unsettled, 0),
            oldestMs: products.reduce((max, p) => Math.max(max, p.oldestMs), 0),
          };
        } catch {
          // Redis does not answer: /health says so already.
          return said;
        }
      })();
      this.settlementLook = { at: now, state };
    }
    return this.settlementLook.state;
  }

  private clusterStatus?: { readonly at: number; readonly status: Promise<RedisStatus> };
  /** Set when the app starts closing (app.close(), SIGTERM): readiness turns 503 at once. */
  private draining = false;

  /** Runs as app.close() begins (SIGTERM), before the HTTP server stops accepting and drains. */
  beforeApplicationShutdown(): void {
    this.draining = true;
  }

  /** Standalone: asked each time (one INFO). Cluster: one shared look per CLUSTER_STATUS_TTL_MS. */
  private redisStatus(): Promise<RedisStatus> {
    const allow = this.config.redisAllowEviction;
    if (!(this.redis instanceof Cluster)) return redisStatus(this.redis, allow);
    const now = performance.now();
    if (!this.clusterStatus || now - this.clusterStatus.at >= CLUSTER_STATUS_TTL_MS) {
      this.clusterStatus = { at: now, status: redisStatus(this.redis, allow) };
    }
    return this.clusterStatus.status;
  }

  /**
   * 200 when Redis answers and would take a write now (no eviction policy that may lose
   * the sale's keys, not a read-only replica, not out of memory, not failing to
   * persist: `problems`; on a cluster every slot is served and every master answers and
   * has none, each master listed) and, for Redlock, a majority of its lock nodes
   * answer; 503 otherwise. Says which strategy runs, and the products it refuses lately
   * because another strategy family sells them.
   */
  @Get()
  @ApiOperation({
    summary: "whether this instance can sell: Redis (and Redlock's nodes) answer and would take a write",
  })
  @ApiResponse({ status: 200, description: 'Redis answers and would take a write', schema: HEALTH })
  @ApiResponse({
    status: 503,
    description:
      'Redis does not answer (`redis: "down"`), or answers but would refuse or lose a write now (`redis: "refusing"`, `problems` say why), or fewer than a quorum of Redlock nodes answer: the same body, `status: "unavailable"`',
    headers: RETRY_AFTER,
    schema: HEALTH,
  })
  async check(@Res({ passthrough: true }) reply: FastifyReply) {
    const [{ redis, problems, cluster }, { lostLocks, lockNodes }, settlement] = await Promise.all([
      this.redisStatus(),
      this.purchases.status(),
      this.settlement(),
    ]);
    const mismatched = this.mismatches.recent();
    const { faultStopAt } = this.config;
    const ok = redis === 'up' && (!lockNodes || lockNodes.up >= lockNodes.quorum);
    if (!ok) void reply.status(HttpStatus.SERVICE_UNAVAILABLE).header('Retry-After', '1');
    return {
      status: ok ? 'ok' : 'unavailable',
      redis,
      ...(problems && problems.length > 0 ? { problems } : {}),
      ...(cluster ? { cluster } : {}),
      ...(lockNodes ? { lockNodes } : {}),
      strategy: this.config.lockStrategy,
      strategyFamily: strategyFamily(this.config.lockStrategy),
      ...(mismatched.length > 0 ? { strategyMismatch: mismatched } : {}),
      // An unsafe strategy, or the fault suite's self-stop hook: either way not for a real sale.
      unsafe: UNSAFE_STRATEGIES.includes(this.config.lockStrategy) || faultStopAt !== null,
      ...(faultStopAt ? { faultStopAt: `${faultStopAt.point}:${faultStopAt.nth}` } : {}),
      lostLocks,
      ...(settlement ? { settlement } : {}),
    };
  }

  /**
   * Liveness: 200 while the process serves HTTP, whatever Redis does, until it exits
   * (draining too). A restart cures nothing Redis does, and a Redis outage would
   * otherwise restart every instance at once.
   */
  @Get('live')
  @ApiOperation({
    summary: 'liveness: the process serves HTTP (never asks Redis); for a restart policy',
    security: [],
  })
  @ApiResponse({ status: 200, description: 'the process answers', schema: LIVENESS })
  live(): { status: 'ok' } {
    return { status: 'ok' };
  }

  /**
   * Readiness: whether to send this instance buyers (readiness.ts has the rule). 503 at
   * once when the app starts closing, so a load balancer stops sending before the
   * server stops accepting. As cheap as /health: one INFO, or the cluster look shared
   * with it (CLUSTER_STATUS_TTL_MS).
   */
  @Get('ready')
  @ApiOperation({
    summary:
      'readiness: this instance can take purchases (Redis answers and takes writes; on a cluster, at least one master does); for a load balancer',
    security: [],
  })
  @ApiResponse({
    status: 200,
    description: '`ready`, or `degraded`: a cluster some of whose masters cannot take a write (`unserved`)',
    schema: READINESS,
  })
  @ApiResponse({
    status: 503,
    description:
      '`unavailable` (Redis does not answer or refuses every write; a cluster that refuses every command or has no master able to write; fewer than a quorum of Redlock nodes), or `draining` (shutting down)',
    headers: RETRY_AFTER,
    schema: READINESS,
  })
  async ready(@Res({ passthrough: true }) reply: FastifyReply): Promise<Readiness> {
    const judged = this.draining ? DRAINING : await this.readiness();
    // The app may have started closing while Redis was asked.
    const answer = this.draining ? DRAINING : judged;
    if (answer.status === 'unavailable' || answer.status === 'draining') {
      void reply.status(HttpStatus.SERVICE_UNAVAILABLE).header('Retry-After', '1');
    }
    return answer;
  }

  private async readiness(): Promise<Readiness> {
    const [redis, { lockNodes }] = await Promise.all([this.redisStatus(), this.purchases.status()]);
    return readiness({ redis, clientReady: this.redis.status === 'ready', ...(lockNodes ? { lockNodes } : {}) });
  }
}
