import { startApp } from './processes';

/**
 * A runner that started servers for the app (Redis, PostgreSQL) stops them when starting
 * the app fails: it must hear the failure as a rejection, never as a crash of its process.
 */
describe('startApp when the app cannot be spawned', () => {
  it('a spawn error Node reports later (ENOENT: no such working directory) rejects with it', async () => {
    await expect(startApp({ env: {}, cwd: '/nonexistent/seckill-cwd' })).rejects.toThrow(
      /the app could not be started: spawn .* ENOENT/,
    );
  });

  it('an environment execve refuses (a variable longer than it takes) rejects the same way', async () => {
    // Thrown at once (E2BIG) or reported later, by libuv's spawn path: either way a rejection.
    await expect(startApp({ env: { TOO_LONG: 'x'.repeat(300_000) } })).rejects.toThrow(
      /^the app could not be started: spawn /,
    );
  });
});
