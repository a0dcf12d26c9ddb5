/** A command line the user must fix: the usage and exit code 2 (bench/entry-point.ts). */
export class UsageError extends Error {}
