import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { ConfigError, loadConfig } from './config/app-config';
import { createApp } from './create-app';

/**
 * Accept queue length. A flash sale opens with thousands of connections at once;
 * Node's default of 511 drops the overflow's SYNs, and each dropped buyer waits out
 * TCP's 1 s, 3 s, 7 s... retransmits. The kernel caps it at net.core.somaxconn.
 */
const LISTEN_BACKLOG = 4096;

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    // One clear line naming the variable, and no stack trace.
    console.error(`seckill: invalid configuration: ${err.message}`);
    process.exit(1);
  }
  const app = await createApp(config);
  const logger = new Logger('Main');

  // Our own signal handling instead of enableShutdownHooks(): Nest re-raises the
  // signal after closing, which ends the process with 143, not 0. app.close()
  // stops accepting, lets in-flight purchases finish (each releases its lock),
  // then closes Redis.
  let closing = false;
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      if (closing) return;
      closing = true;
      logger.log(`${signal}: finishing in-flight requests, then closing`);
      app.close().then(
        () => process.exit(0),
        (err: Error) => {
          logger.error(`shutdown failed: ${err.message}`);
          process.exit(1);
        },
      );
    });
  }

  await app.listen({ port: config.port, host: config.host, backlog: LISTEN_BACKLOG });
  logger.log(`seckill listening on ${await app.getUrl()}`);
}

main().catch((err: Error) => {
  console.error(`seckill: failed to start: ${err.stack ?? err.message}`);
  process.exit(1);
});
