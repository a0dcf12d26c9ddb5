/**
 * What a run writes down (results JSON, HTML report, refusal lines) is shared and kept:
 * a deployment's secrets are not. The admin token, the buyer-token secret and any
 * password in a URL (--redis, --database, --target) are written as REDACTED.
 */
import type { BenchOptions } from './options';

export const REDACTED = '<redacted>';

/** Flags whose value is a secret as a whole. */
const SECRET_FLAGS = ['--admin-token', '--buyer-secret'];

/** `scheme://user:password@host`: the password, wherever a URL stands in `text`. */
export function redactUrls(text: string): string {
  return text.replace(/(\b[a-z][a-z0-9+.-]*:\/\/[^\s/@:,]*:)[^\s/@,]*@/gi, `$1${REDACTED}@`);
}

/** The command line as typed, its secrets replaced. */
export function redactArgv(argv: readonly string[]): string[] {
  return argv.map((arg, i) => {
    const flag = SECRET_FLAGS.find((f) => arg.startsWith(`${f}=`));
    if (flag) return `${flag}=${REDACTED}`;
    return SECRET_FLAGS.includes(argv[i - 1]) ? REDACTED : redactUrls(arg);
  });
}

/** The options as the results record them: every secret of the deployment's replaced. */
export function redactOptions(options: BenchOptions): BenchOptions {
  const { target } = options;
  return {
    ...options,
    ...(options.redis !== undefined && { redis: redactUrls(options.redis) }),
    ...(target && {
      target: {
        ...target,
        urls: target.urls.map(redactUrls),
        adminToken: REDACTED,
        ...(target.database !== undefined && { database: redactUrls(target.database) }),
        ...(target.buyerAuth && { buyerAuth: { ...target.buyerAuth, secret: REDACTED } }),
      },
    }),
  };
}
