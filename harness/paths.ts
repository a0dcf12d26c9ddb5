import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The checkout's root, found from here whether this runs from source (tests) or from dist/ (bench). */
function findRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'src'))) return dir;
    if (dirname(dir) === dir) throw new Error(`no checkout above ${from}`);
  }
}

export const ROOT = findRoot(__dirname);
/** The built app, as `npm start` runs it. */
export const APP_MAIN = join(ROOT, 'dist', 'src', 'main.js');
/**
 * Where the apps the harness and the tests start run: a folder with no `.env`. The app
 * reads `.env` from its working directory, and a developer's (for `npm start`) must not
 * change what a test, the bench or the fault suite runs.
 */
export const APP_CWD = join(ROOT, 'dist');
/** The built bench's node:cluster wrapper (`--workers W`). */
export const APP_CLUSTER = join(ROOT, 'dist', 'bench', 'app-cluster.js');
/** The minimal node:http server every bench row is compared with (`--baseline`). */
export const BASELINE_MAIN = join(ROOT, 'dist', 'bench', 'baselines', 'atomic-http.js');
/** Bare Fastify answering every purchase SOLD_OUT, the sold-out path's yardstick (`--sold-out-path`). */
/** The door's yardstick: bare node:http answering the sold-out 409 (bench/baselines/raw-http.ts). */
export const RAW_HTTP_MAIN = join(ROOT, 'dist', 'bench', 'baselines', 'raw-http.js');
export const FASTIFY_ROUTE_MAIN = join(ROOT, 'dist', 'bench', 'baselines', 'fastify-route.js');
