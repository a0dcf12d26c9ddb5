import { get as httpGet } from 'node:http';
import Ajv from 'ajv';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LOCK_STRATEGY_NAMES } from '../src/config/app-config';
import { ERROR_BODY_SCHEMA } from '../src/errors/error-body';
import { SCENARIO_NAMES } from '../bench/faults/run';
import { catalogue } from '../bench/lab/lessons';
import { eventId, MAX_EVENTS, MAX_QUEUED, Run, RunEvent, Runs, RunState } from '../bench/lab/runs';
import { isLoopback, LoopbackOnlyError, RunningLab, startLab } from '../bench/lab/server';
import { runBench } from './helpers/bench';
import { FailingLabs, postRun, SMALL_RUN } from './helpers/lab';

const ROOT = join(__dirname, '..');

/** The app's error body, as the lab answers it. */
interface ErrorAnswer {
  statusCode: number;
  code: string;
  message: string;
  errors?: { field: string; messages: string[] }[];
}

/** Resolves once the run reaches one of `states` (the lab says so by an event): a state, never a moment. */
export function reaches(lab: RunningLab, run: Pick<Run, 'id'>, states: RunState[]): Promise<Run> {
  return new Promise((resolve) => {
    const check = () => {
      const now = lab.runs.get(run.id)!;
      if (!states.includes(now.state)) return false;
      unsubscribe();
      resolve(now);
      return true;
    };
    const unsubscribe = lab.runs.subscribe(() => void check());
    check();
  });
}

/** The pids in a process group now, with their command names (from /proc). */
function groupMembers(pgid: number): { pid: number; comm: string }[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .flatMap((d) => {
      try {
        const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
        // pid (comm) state ppid pgrp ...: the comm may hold spaces, the fields after it do not.
        const [, comm, rest] = /^\d+ \((.*)\) (.*)$/s.exec(stat)!;
        return Number(rest.split(' ')[2]) === pgid ? [{ pid: Number(d), comm }] : [];
      } catch {
        return [];
      }
    });
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** `promise`, or a rejection naming `what` after `ms`: a run that never gets there fails the test, not the suite's clock. */
function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise,
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`not ${what} within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * The lab's event stream (GET /api/events with `headers`), read until the event with
 * id `until` has come: the `session` it names first, and each event's id in order. On
 * a connection of its own (no pooled one, which may be a closed lab's).
 */
function readEvents(
  url: string,
  headers: Record<string, string>,
  until: number,
): Promise<{ session: number; ids: number[] }> {
  return new Promise((resolve, reject) => {
    const req = httpGet(new URL('/api/events', url), { headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
        if (!text.includes(`id: ${until}\n`)) return;
        req.destroy();
        const session = /^event: session\ndata: (.*)$/m.exec(text);
        resolve({
          session: (JSON.parse(session![1]) as { session: number }).session,
          ids: [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1])),
        });
      });
    });
    req.on('error', reject);
  });
}

describe('the lab: a run that goes wrong', () => {
  jest.setTimeout(60_000);
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'seckill-lab-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('marks a run failed when the lab itself cannot start it, and goes on with the next (no unhandled rejection)', async () => {
    // Its results folder cannot be made: a file stands where a folder should.
    writeFileSync(join(dir, 'file'), '');
    const runs = new Runs(ROOT, join(dir, 'file', 'results'));
    const lab = { runs } as RunningLab;
    const first = runs.submit({ kind: 'strategy', strategy: 'none', buyers: 10, stock: 5, connections: 2 });
    const second = runs.submit({ kind: 'strategy', strategy: 'none', buyers: 10, stock: 5, connections: 2 });
    for (const run of [first, second]) {
      const ended = await within(10_000, `run ${run.id} failed`, reaches(lab, run, ['failed']));
      expect(ended.message).toMatch(/^the lab failed to run it: ENOTDIR/);
    }
    expect(runs.get(second.id)!.events.at(-1)).toMatchObject({ type: 'state', state: 'failed' });
    // However many events a run sends, the lab keeps a bounded number: its state changes stay.
    const add = (runs as unknown as { add(run: Run, e: RunEvent): void }).add.bind(runs);
    for (let i = 0; i < MAX_EVENTS + 1_000; i++)
      add(first, { type: 'progress', label: 'x', ms: i, done: i, sold: 0, stock: 5, codes: {} });
    expect(first.events.length).toBeLessThanOrEqual(MAX_EVENTS + 200);
    expect(first.events.filter((e) => e.type === 'state').map((e) => (e as { state: string }).state)).toEqual([
      'queued',
      'failed',
    ]);
  });

  it('stops a run past its deadline with its processes, and says it timed out', async () => {
    const runs = new Runs(ROOT, dir, undefined, () => 1_500);
    const run = runs.submit({ kind: 'fault', scenario: 'paused-fenced', size: 'full' });
    const ended = await within(
      30_000,
      'timed out',
      reaches({ runs } as RunningLab, run, ['timed-out', 'done', 'failed']),
    );
    expect({ state: ended.state, message: ended.message }).toEqual({
      state: 'timed-out',
      message: 'timed out: still running after 2 s, stopped with its processes',
    });
    expect(run.events.at(-1)).toMatchObject({ type: 'state', state: 'timed-out', message: ended.message });
    expect(groupMembers(run.pid!)).toEqual([]);
  });
});

describe('the lab: its end', () => {
  jest.setTimeout(60_000);

  it('ends the run in progress with it, however it ends (SIGHUP: its terminal closed)', async () => {
    const lab = spawn(process.execPath, [join(ROOT, 'scripts', 'lab.js')], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    let pgid: number | undefined;
    try {
      let out = '';
      const url = await new Promise<string>((resolve) =>
        lab.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          const m = /lab: (http:\S+)/.exec(out);
          if (m) resolve(m[1]);
        }),
      );
      const res = await fetch(new URL('/api/runs', url), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ kind: 'fault', scenario: 'paused-fenced', size: 'full' }),
      });
      pgid = ((await res.json()) as { pid: number }).pid;
      // A state to wait for: its Redis is up, in the run's group.
      while (!groupMembers(pgid).some((m) => m.comm.startsWith('redis-server'))) await sleep(20);
      const exited = once(lab, 'exit');
      lab.kill('SIGHUP');
      await exited;
      expect(groupMembers(pgid)).toEqual([]);
    } finally {
      lab.kill('SIGKILL');
      if (pgid) {
        try {
          process.kill(-pgid, 'SIGKILL');
        } catch {
          // gone, as it should be
        }
      }
    }
  });
});

describe('the lab: lessons and reading guide', () => {
  const groups = catalogue(ROOT);
  const lessons = groups.flatMap((g) => g.lessons);

  it('offers every strategy and every fault scenario of the suite, each in exactly one lesson', () => {
    const names = (kind: string) => lessons.filter((l) => l.kind === kind).flatMap((l) => l.names);
    expect(names('strategy').sort()).toEqual([...LOCK_STRATEGY_NAMES].sort());
    expect(names('fault').sort()).toEqual([...SCENARIO_NAMES].sort());
    // Grouped as the docs group them; each lesson says something.
    expect(groups.map((g) => g.title)).toEqual(expect.arrayContaining(['Classic mistakes', 'Network faults']));
    for (const lesson of lessons) expect(lesson.lesson.length).toBeGreaterThan(40);
    // The docs' diagrams: the race under `none`, the late write under `lock` and `fenced`.
    for (const name of ['none', 'lock', 'fenced']) {
      expect(lessons.find((l) => l.id === `strategy:${name}`)!.diagrams.length).toBeGreaterThan(0);
    }
  });

  it('offers one product on three shards beside one product on one shard, each under the docs section that runs it', () => {
    const shards = groups.filter((g) => g.kind === 'shards');
    expect(shards.map((g) => g.title)).toEqual(['Scaling']);
    expect(shards[0].lessons.map(({ id, title, names, buckets, doc }) => ({ id, title, names, buckets, doc }))).toEqual(
      [
        {
          id: 'shards:1',
          title: 'One product on one shard',
          names: ['buckets: 1'],
          buckets: 1,
          doc: 'docs/scaling.md#one-product-on-one-shard',
        },
        {
          id: 'shards:3',
          title: 'One product on three shards',
          names: ['buckets: 3'],
          buckets: 3,
          doc: 'docs/scaling.md#one-product-on-three-shards',
        },
      ],
    );
    // Three shards draws its section's move between buckets.
    expect(shards[0].lessons[1].diagrams.join('\n')).toContain('move-out-4.lua');
    // Between the strategies and the faults, as the page shows them.
    const kinds = groups.map((g) => g.kind);
    expect(kinds.lastIndexOf('strategy')).toBeLessThan(kinds.indexOf('shards'));
    expect(kinds.indexOf('shards')).toBeLessThan(kinds.indexOf('fault'));
  });

  it('links every lesson to files that exist, in its reading order', () => {
    const missing = lessons.flatMap((l) =>
      l.guide.filter((g) => !existsSync(join(ROOT, g.path))).map((g) => `${l.id}: ${g.path}`),
    );
    expect(missing).toEqual([]);
    for (const lesson of lessons) expect(lesson.guide.length).toBeGreaterThan(1);
    expect(lessons.find((l) => l.id === 'strategy:fenced')!.guide.map((g) => g.path)).toEqual([
      'src/locks/lock.ts',
      'src/locks/strategies/fenced.strategy.ts',
      'src/redis/scripts/fenced-acquire-6.lua',
      'src/redis/scripts/fenced-write-8.lua',
      'src/redis/scripts/release-lock-1.lua',
      'src/orders/purchases/batched.purchases.ts',
      'src/orders/fenced-write.spec.ts',
    ]);
  });
});

describe('the lab: binding', () => {
  it('takes loopback only', () => {
    expect(['127.0.0.1', '::1', 'localhost', '127.0.0.2'].map(isLoopback)).toEqual([true, true, true, true]);
    expect(['0.0.0.0', '::', '192.168.1.5', 'example.com'].map(isLoopback)).toEqual([false, false, false, false]);
  });

  it('refuses any other address unless told, and says how (npm run lab exits 2, binds nothing)', async () => {
    await expect(startLab({ host: '0.0.0.0', port: 0, allowRemote: false })).rejects.toThrow(LoopbackOnlyError);
    const run = spawnSync(process.execPath, [join(ROOT, 'scripts', 'lab.js')], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, LAB_HOST: '0.0.0.0' },
    });
    expect({ status: run.status, stdout: run.stdout }).toEqual({ status: 2, stdout: '' });
    expect(run.stderr).toMatch(/binds loopback only .* set LAB_ALLOW_REMOTE=1/);
  });
});

describe('the lab: runs from a script, and a lab restarted on the same port', () => {
  jest.setTimeout(60_000);
  const labs = new FailingLabs();
  afterAll(() => labs.close());

  const failed = (lab: RunningLab, run: Pick<Run, 'id'>) =>
    within(10_000, `run ${run.id} failed`, reaches(lab, run, ['failed']));
  const idsOf = (lab: RunningLab) => lab.runs.list().flatMap((r) => r.events.map((e) => eventId(e)!));

  it('shows a run that names no lane in the left lane, where a Run button without a side puts it', async () => {
    const lab = await labs.start();
    const run = await postRun(lab);
    expect(run.lane).toBe('left');
    await failed(lab, run);
    const listed = (await (await fetch(new URL('/api/runs', lab.url))).json()) as Run[];
    expect(listed.map((r) => [r.id, r.lane])).toEqual([[run.id, 'left']]);
    const right = await postRun(lab, { ...SMALL_RUN, lane: 'right' });
    expect(right.lane).toBe('right');
    await failed(lab, right);
  });

  it("numbers events on from the last lab's on the same port: a browser's Last-Event-ID from before the restart gets every new event", async () => {
    const before = await labs.start();
    const port = Number(new URL(before.url).port);
    for (let i = 0; i < 2; i++) await failed(before, before.runs.submit(SMALL_RUN));
    const old = idsOf(before);
    await before.close();
    const after = await labs.start(port);
    expect(after.url).toBe(before.url);
    await failed(after, after.runs.submit(SMALL_RUN));
    const ids = idsOf(after);
    expect(Math.min(...ids)).toBeGreaterThan(Math.max(...old));
    // The EventSource of a page that followed the last lab reconnects with the last id it saw.
    const stream = await within(
      10_000,
      "the new lab's events",
      readEvents(after.url, { 'last-event-id': String(Math.max(...old)) }, ids.at(-1)!),
    );
    expect(stream.ids).toEqual(ids);
    // And learns that this is another lab: its runs (#1 again) are not the ones it shows.
    expect(stream.session).toBe(after.runs.session);
    expect(stream.session).not.toBe(before.runs.session);
  });

  it('serves its icon, so a browser finds no 404', async () => {
    const lab = await labs.start();
    const html = await (await fetch(lab.url)).text();
    expect(html).toContain('<link rel="icon" type="image/svg+xml" href="/favicon.ico">');
    const icon = await fetch(new URL('/favicon.ico', lab.url));
    expect({ status: icon.status, type: icon.headers.get('content-type') }).toEqual({
      status: 200,
      type: 'image/svg+xml',
    });
    expect(await icon.text()).toMatch(/^<svg /);
  });
});

describe('the lab: its API', () => {
  jest.setTimeout(120_000);
  let lab: RunningLab;
  let dir: string;
  const ajv = new Ajv();
  const errorShape = ajv.compile(ERROR_BODY_SCHEMA);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'seckill-lab-'));
    lab = await startLab({ host: '127.0.0.1', port: 0, allowRemote: false, resultsDir: dir });
  });
  afterAll(async () => {
    await lab?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A GET with the Host header a browser at another name would send (fetch will not set it). */
  const hostGet = (path: string, host: string): Promise<Response> =>
    new Promise((resolve, reject) => {
      const url = new URL(path, lab.url);
      const req = httpGet({ host: url.hostname, port: url.port, path: url.pathname, headers: { host } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve(new Response(Buffer.concat(chunks), { status: res.statusCode })));
      });
      req.on('error', reject);
    });
  const post = (path: string, body: string, type = 'application/json') =>
    fetch(new URL(path, lab.url), { method: 'POST', headers: { 'content-type': type }, body });

  it.each([
    ['an unknown strategy', { kind: 'strategy', strategy: 'nope' }, 400, 'VALIDATION_FAILED', ['strategy']],
    ['buyers out of bounds', { kind: 'strategy', strategy: 'none', buyers: 0 }, 400, 'VALIDATION_FAILED', ['buyers']],
    [
      'a field nobody asked for',
      { kind: 'fault', scenario: 'paused-fenced', rm: '-rf' },
      400,
      'VALIDATION_FAILED',
      ['rm'],
    ],
    ['an unknown scenario', { kind: 'fault', scenario: 'paused-nothing' }, 400, 'VALIDATION_FAILED', ['scenario']],
    ['a bucket count no lesson runs', { kind: 'shards', buckets: 2 }, 400, 'VALIDATION_FAILED', ['buckets']],
    [
      'a shard lesson with a strategy',
      { kind: 'shards', buckets: 3, strategy: 'none' },
      400,
      'VALIDATION_FAILED',
      ['strategy'],
    ],
    ['an unknown kind', { kind: 'bench' }, 400, 'VALIDATION_FAILED', ['kind']],
    ['a list', [1], 400, 'VALIDATION_FAILED', ['']],
  ])(
    'answers %s with the code and field that say so, and starts nothing',
    async (_what, body, status, code, fields) => {
      const res = await post('/api/runs', JSON.stringify(body));
      const answer = (await res.json()) as ErrorAnswer;
      expect({
        status: res.status,
        code: answer.code,
        fields: answer.errors?.map((e) => e.field),
      }).toEqual({ status, code, fields });
      expect(errorShape(answer)).toBe(true);
      expect(lab.runs.list()).toEqual([]);
    },
  );

  it.each([
    ['not JSON', () => post('/api/runs', '{'), 400, 'BAD_REQUEST'],
    [
      'another media type',
      () => post('/api/runs', 'kind=strategy', 'application/x-www-form-urlencoded'),
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    ],
    [
      'a body too large',
      () => post('/api/runs', JSON.stringify({ kind: 'x'.repeat(20_000) })),
      413,
      'PAYLOAD_TOO_LARGE',
    ],
    ['an unknown run', () => post('/api/runs/99/stop', '{}'), 404, 'NOT_FOUND'],
    [
      'a kind named like an object property',
      () => post('/api/runs', '{"kind":"constructor"}'),
      400,
      'VALIDATION_FAILED',
    ],
    ['a path that is no URL', () => fetch(new URL('/source/%', lab.url)), 400, 'BAD_REQUEST'],
    ['a Host that is not the lab (DNS rebinding)', () => hostGet('/api/lessons', 'attacker.example'), 404, 'NOT_FOUND'],
    ['an unknown route', () => fetch(new URL('/api/nothing', lab.url)), 404, 'NOT_FOUND'],
    [
      'a source outside the checkout',
      () => fetch(new URL('/source/..%2F..%2Fetc%2Fpasswd', lab.url)),
      404,
      'NOT_FOUND',
    ],
  ])('answers %s with the app’s error shape', async (_what, send, status, code) => {
    const res = await send();
    const answer = (await res.json()) as ErrorAnswer;
    expect({ status: res.status, code: answer.code }).toEqual({ status, code });
    expect(errorShape(answer)).toBe(true);
    expect(lab.runs.list()).toEqual([]);
  });

  it('links each lesson to its docs section, anchor kept', async () => {
    const html = await (await fetch(lab.url)).text();
    expect(html).toMatch(/<a class="doc" href="\/source\/docs\/[\w-]+\.md#[\w-]+"/);
  });

  it('runs one experiment at a time: the next waits in line (the API says where), a full line refuses, a waiting one stops at once, a running one stops with its whole process group', async () => {
    const first = lab.runs.submit({ kind: 'fault', scenario: 'paused-fenced', size: 'full' });
    expect(first.state).toBe('running');
    const waiting: { id: number; state: string; position: number }[] = [];
    const request = JSON.stringify({ kind: 'strategy', strategy: 'fenced', buyers: 10, stock: 5, connections: 2 });
    for (let i = 0; i < MAX_QUEUED; i++) {
      const res = await post('/api/runs', request);
      expect(res.status).toBe(202);
      waiting.push((await res.json()) as (typeof waiting)[number]);
    }
    expect(waiting.map((w) => [w.state, w.position])).toEqual(waiting.map((_, i) => ['queued', i + 1]));
    // One more is refused, and nothing is queued.
    const full = await post('/api/runs', request);
    const answer = (await full.json()) as ErrorAnswer;
    expect({ status: full.status, code: answer.code }).toEqual({ status: 429, code: 'LAB_LINE_FULL' });
    expect(full.headers.get('retry-after')).toBe('10');
    expect(errorShape(answer)).toBe(true);
    expect(lab.runs.list().length).toBe(1 + MAX_QUEUED);
    // The one ahead leaves the line: those behind move up, as the API then says.
    const res = await post(`/api/runs/${waiting[0].id}/stop`, '{}');
    expect(((await res.json()) as { state: string }).state).toBe('stopped');
    const now = (await (await fetch(new URL('/api/runs', lab.url))).json()) as typeof waiting;
    expect(now.find((r) => r.id === waiting[1].id)).toMatchObject({ state: 'queued', position: 1 });
    for (const w of waiting.slice(1)) await lab.runs.stop(lab.runs.get(w.id)!);
    // Once its apps sell, the run has Redis and two app processes in its group (the step
    // may have come already, while the line was filled).
    const isStart = (event: { type: string; step?: string }) => event.type === 'step' && event.step === 'sale started';
    const started = await new Promise<string>((resolve) => {
      const seen = first.events.find(isStart);
      if (seen) return resolve((seen as { detail?: string }).detail!);
      const off = lab.runs.subscribe((run, event) => {
        if (run === first && isStart(event)) {
          off();
          resolve((event as { detail?: string }).detail!);
        }
      });
    });
    const members = groupMembers(first.pid!);
    const appPids = /pids (\d+), (\d+)/.exec(started)!.slice(1).map(Number);
    const redisPids = members.filter((m) => m.comm.startsWith('redis-server')).map((m) => m.pid);
    expect(members.map((m) => m.pid)).toEqual(expect.arrayContaining(appPids));
    expect(redisPids.length).toBe(1);
    await lab.runs.stop(first);
    expect(first.state).toBe('stopped');
    // Each of them gone: the CLI, its Redis, its two apps; and nothing else left in the group.
    expect([first.pid!, ...redisPids, ...appPids].filter(alive)).toEqual([]);
    expect(() => process.kill(-first.pid!, 0)).toThrow(/ESRCH/);
  });

  it("shows a bench run's figures as the same experiment run from the CLI gives them", async () => {
    const res = await post(
      '/api/runs',
      JSON.stringify({ kind: 'strategy', strategy: 'fenced', buyers: 300, stock: 50, connections: 20 }),
    );
    expect(res.status).toBe(202);
    const run = await reaches(lab, (await res.json()) as Pick<Run, 'id'>, ['done', 'failed']);
    expect(run.state).toBe('done');
    const shown = (await (await fetch(new URL(`/api/runs/${run.id}`, lab.url))).json()) as {
      events: { type: string; rows?: unknown[] }[];
    };
    const written = JSON.parse(readFileSync(run.out!, 'utf8'));
    // What the lab shows is what the bench wrote, row for row.
    expect(shown.events.find((e) => e.type === 'result')!.rows).toEqual(written.rows);
    expect(written.command).toBe(run.command);
    // The same command from the CLI: the same sale, the same verdict.
    const args = run.command
      .replace(/^npm run bench -- /, '')
      .replace(/ --out \S+$/, '')
      .split(' ');
    const cli = runBench(args, join(dir, 'cli.json'), 90_000).report.rows[0];
    const figures = (row: Record<string, unknown>) => {
      const { label, strategy, requests, stock, sold, stockLeft, oversold, orders, status, codes, invariants, pass } =
        row;
      return { label, strategy, requests, stock, sold, stockLeft, oversold, orders, status, codes, invariants, pass };
    };
    expect(figures(written.rows[0])).toEqual(figures(cli));
    expect(figures(cli)).toMatchObject({
      sold: 50,
      stockLeft: 0,
      oversold: 0,
      pass: true,
      status: { 201: 50, 409: 250 },
    });
    // Its live line ended where Redis's stock key did.
    const progress = run.events.filter((e) => e.type === 'progress');
    expect(progress.at(-1)).toMatchObject({ sold: 50, stock: 50 });
  });

  it('runs one product on three shards: each bucket on a master of its own, each master with its share, the moves, the verdict over every bucket', async () => {
    const res = await post(
      '/api/runs',
      JSON.stringify({ kind: 'shards', buckets: 3, buyers: 300, stock: 300, connections: 20 }),
    );
    expect(res.status).toBe(202);
    const run = await reaches(lab, (await res.json()) as Pick<Run, 'id'>, ['done', 'failed']);
    expect(run.command).toBe('npm run lab:shards -- --buckets 3 --buyers 300 --stock 300 --connections 20');
    expect(run.state).toBe('done');
    const steps = run.events.flatMap((e) => (e.type === 'step' ? [e] : []));
    const detail = (step: RegExp) => steps.filter((s) => step.test(s.step)).map((s) => s.detail ?? '');
    // Placed before the sale: three buckets, three masters, the stock split evenly.
    const placed = detail(/^bucket \S+$/);
    expect(placed).toHaveLength(3);
    expect(new Set(placed.map((d) => /on master (\S+),/.exec(d)![1])).size).toBe(3);
    expect(placed.map((d) => Number(/, (\d+) units/.exec(d)![1]))).toEqual([100, 100, 100]);
    // Once sold: every unit an order of some bucket, none left; the moves each bucket took in.
    const done = detail(/^bucket \S+ done$/).map((d) => {
      const [, orders, left, units] = /^(\d+) orders, (\d+) left, \d+ moves? in \((\d+) units?\)$/.exec(d)!;
      return { orders: Number(orders), left: Number(left), units: Number(units) };
    });
    expect(done).toHaveLength(3);
    expect(done.reduce((sum, b) => sum + b.orders, 0)).toBe(300);
    expect(done.every((b) => b.left === 0)).toBe(true);
    // Each master's share of the Redis CPU, each serving one bucket.
    const shards = detail(/^shard /);
    expect(shards).toHaveLength(3);
    for (const d of shards) expect(d).toMatch(/^\d+% of the Redis CPU, .*\(bucket \S+\)$/);
    const outcome = run.events.find((e) => e.type === 'outcome');
    expect(outcome).toMatchObject({ pass: true, sold: 300, left: 0, oversold: 0, problems: [] });
    if (outcome?.type !== 'outcome') throw new Error('no outcome');
    // The story's moves are those the buckets took in.
    const [, units] = /3 buckets on 3 masters, \d+ moves? \((\d+) units?\)/.exec(outcome.story)!;
    expect(Number(units)).toBe(done.reduce((sum, b) => sum + b.units, 0));
    expect(outcome.history).toMatch(/^history holds: peak 300 of 300 held/);
  });

  it('streams each event with its id, and a reconnecting browser (Last-Event-ID) gets only those after it', async () => {
    const all = lab.runs.list().flatMap((r) => r.events.map((e) => eventId(e)!));
    const ids = [...all].sort((a, b) => a - b);
    const since = ids[Math.floor(ids.length / 2)];
    const read = async (headers: Record<string, string>) => (await readEvents(lab.url, headers, ids.at(-1)!)).ids;
    expect(await read({})).toEqual(ids);
    expect(await read({ 'last-event-id': String(since) })).toEqual(ids.filter((id) => id > since));
  });

  it('answers 404 for a report that is gone, naming no path of the machine', async () => {
    const run = lab.runs.list().find((r) => r.report)!;
    expect((await fetch(new URL(`/runs/${run.id}/report`, lab.url))).status).toBe(200);
    rmSync(join(ROOT, run.report!));
    const res = await fetch(new URL(`/runs/${run.id}/report`, lab.url));
    const answer = (await res.json()) as ErrorAnswer;
    expect({ status: res.status, code: answer.code }).toEqual({ status: 404, code: 'NOT_FOUND' });
    expect(answer.message).not.toContain(ROOT);
    expect(answer.message).not.toContain(dir);
  });
});
