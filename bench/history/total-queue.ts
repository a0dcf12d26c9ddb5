import type { Finding, SettledOrder } from './history';
import type { OrderState } from './log-check';

const STATUS_OF: Readonly<Record<string, OrderState['status']>> = {
  reserved: 'reserved',
  paid: 'paid',
  cancelled: 'cancelled',
  expired: 'expired',
};

/**
 * PostgreSQL as a total queue (Jepsen's total-queue): every order the log has (and every
 * acknowledged one) there once with its final status; none there that the log lacks.
 * An order PostgreSQL has and Redis's log does not is one a failover lost after it was
 * settled: its unit went back to Redis's stock and was sold again.
 */
export function checkTotalQueue(
  states: ReadonlyMap<string, OrderState>,
  settled: Iterable<SettledOrder>,
  acknowledged?: ReadonlySet<string>,
): Finding[] {
  const findings: Finding[] = [];
  const seen = new Set<string>();
  for (const row of settled) {
    if (seen.has(row.orderId)) {
      findings.push({
        check: 'totalQueue',
        ms: row.createdMs,
        orderIds: [row.orderId],
        userId: row.userId,
        detail: `order ${row.orderId} is in PostgreSQL twice`,
      });
      continue;
    }
    seen.add(row.orderId);
    const state = states.get(row.orderId);
    if (!state) {
      findings.push({
        check: 'totalQueue',
        ms: row.createdMs,
        orderIds: [row.orderId],
        userId: row.userId,
        detail: `order ${row.orderId} of ${row.userId} (${row.status}) is in PostgreSQL but not in Redis's log: ${
          acknowledged?.has(row.orderId) ? 'acknowledged, then lost by Redis' : 'lost by Redis, or never acknowledged'
        } (its ${row.quantity} ${row.quantity === 1 ? 'unit was' : 'units were'} back in Redis's stock)`,
      });
      continue;
    }
    if (STATUS_OF[row.status] !== state.status || row.userId !== state.userId || row.quantity !== state.quantity) {
      findings.push({
        check: 'totalQueue',
        ms: row.createdMs,
        orderIds: [row.orderId],
        userId: row.userId,
        detail: `order ${row.orderId}: PostgreSQL has ${row.status} ${row.quantity} of ${row.userId}, Redis's log ${state.status} ${state.quantity} of ${state.userId}`,
      });
    }
  }
  for (const [id, state] of states) {
    if (seen.has(id)) continue;
    findings.push({
      check: 'totalQueue',
      ms: state.ms,
      orderIds: [id],
      userId: state.userId,
      detail: `order ${id} of ${state.userId} (${state.status}) is in Redis's log but not in PostgreSQL`,
    });
  }
  for (const id of acknowledged ?? []) {
    if (seen.has(id) || states.has(id)) continue;
    findings.push({
      check: 'totalQueue',
      ms: null,
      orderIds: [id],
      detail: `order ${id} was acknowledged (201) but is neither in Redis's log nor in PostgreSQL`,
    });
  }
  return findings;
}
