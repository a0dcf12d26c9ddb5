import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Run } from '../../bench/lab/runs';
import { RunningLab, startLab } from '../../bench/lab/server';

/** The smallest strategy run: what the tests below start when any run will do. */
export const SMALL_RUN = { kind: 'strategy', strategy: 'none', buyers: 10, stock: 5, connections: 2 } as const;

/**
 * Labs whose runs fail the moment they would start (a file stands where their results
 * folder should be): runs with their events and states, and no processes. For the lab's
 * API and page around runs, not for the runs themselves.
 */
export class FailingLabs {
  /** Made by the first start (a describe whose tests are all filtered out makes nothing). */
  private dir: string | undefined;
  private readonly labs: RunningLab[] = [];

  /** A lab on loopback, on `port` (0: a free one). */
  async start(port = 0): Promise<RunningLab> {
    if (!this.dir) {
      this.dir = mkdtempSync(join(tmpdir(), 'seckill-lab-'));
      writeFileSync(join(this.dir, 'file'), '');
    }
    const lab = await startLab({
      host: '127.0.0.1',
      port,
      allowRemote: false,
      resultsDir: join(this.dir, 'file', 'results'),
    });
    this.labs.push(lab);
    return lab;
  }

  async close(): Promise<void> {
    for (const lab of this.labs) await lab.close();
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }
}

/** POST /api/runs as a script sends it (no lane unless `body` names one): the 202's run. */
export async function postRun(lab: RunningLab, body: Record<string, unknown> = SMALL_RUN): Promise<Run> {
  const res = await fetch(new URL('/api/runs', lab.url), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (res.status !== 202) throw new Error(`POST /api/runs answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as Run;
}
