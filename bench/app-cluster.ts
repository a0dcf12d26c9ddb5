/**
 * `--workers W`: W app processes sharing one port through node:cluster, so the lock
 * is proven across processes, each with its own Redis connections. The primary only
 * hands out connections; SIGTERM/SIGINT is passed to every worker, and the primary
 * exits 0 once all of them have drained and exited 0.
 *
 * usage: node app-cluster.js <W> <path to dist/src/main.js>   (env as for the app)
 */
import cluster from 'node:cluster';

const [workersArg, main] = process.argv.slice(2);
const workers = Number(workersArg);
if (!Number.isInteger(workers) || workers < 1 || !main) {
  console.error('usage: app-cluster <workers> <dist/src/main.js>');
  process.exit(2);
}

cluster.setupPrimary({ exec: main });
let failed = false;
let stopping = false;
for (let i = 0; i < workers; i++) cluster.fork();

cluster.on('exit', (worker, code, signal) => {
  if (code !== 0) failed = true;
  if (!stopping) {
    // A worker that dies on its own is a failed run, not something to paper over.
    console.error(`app-cluster: worker ${worker.process.pid} exited (${signal ?? code}); stopping the others`);
    stop();
  }
  if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(failed ? 1 : 0);
});

function stop(): void {
  stopping = true;
  for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM');
}

process.on('SIGTERM', stop);
process.on('SIGINT', stop);
