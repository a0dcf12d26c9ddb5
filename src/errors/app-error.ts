/**
 * The mechanism every error the API answers with is declared by (fastify's
 * lib/errors.js: `createError(code, message, status)`): one code, one status, one
 * message, and its example answer beside it. The codes themselves are in
 * request-errors.ts, sale-errors.ts and retry-errors.ts, loaded in order by errors.ts.
 */
export abstract class AppError extends Error {
  abstract readonly code: string;
  abstract readonly status: number;
  /** Seconds the client should wait before trying again (the answer's Retry-After), when the refusal knows. */
  readonly retryAfterS?: number;

  constructor(message: string) {
    // An expected outcome, not a bug: nobody reads its stack, and capturing one for
    // every SOLD_OUT of a 100,000-buyer sale showed up in the profile.
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
  }

  override get name(): string {
    return this.constructor.name;
  }
}

/** What the table keeps of each code: its status, and its example answer once example() gave it. */
export interface ErrorDeclaration {
  readonly status: number;
  /** The code's example answer in the OpenAPI document and docs/api.md, made by the code's own class. */
  example?: () => AppError;
}

/** Every code createError declared: the table docs/api.md, the OpenAPI document and the filter are checked against. */
export const ERROR_CODES = new Map<string, ErrorDeclaration>();

/** A class for one code: `new SoldOutError('phone')` says `product "phone" is sold out`, 409. */
export function createError<Args extends unknown[]>(code: string, status: number, message: (...args: Args) => string) {
  if (ERROR_CODES.has(code)) throw new Error(`error code ${code} is declared twice`);
  ERROR_CODES.set(code, { status });
  return class extends AppError {
    static readonly code = code;
    readonly code = code;
    readonly status = status;
    /** What it was made with (saidOf() makes it again of another product). */
    readonly args: Args;
    constructor(...args: Args) {
      super(message(...args));
      this.args = args;
    }
  };
}

/**
 * The same refusal said of product `to` where it was said of `from`, its first argument
 * (an escrow bucket's refusal said of the product the buyer asked for: no buyer can call a
 * bucket's routes), made again by its own class; any other error as it is.
 */
export function saidOf(err: unknown, from: string, to: string): unknown {
  const args = err instanceof AppError ? (err as AppError & { args?: unknown[] }).args : undefined;
  if (!args || args[0] !== from) return err;
  return new (err!.constructor as new (...made: unknown[]) => AppError)(to, ...args.slice(1));
}

/**
 * The example answer of a code, written under its class: the arguments are checked
 * against the class's own constructor, and the answer is made only when a document
 * asks for it.
 */
export function example<Class extends (new (...args: never[]) => AppError) & { readonly code: string }>(
  cls: Class,
  ...args: ConstructorParameters<Class>
): void {
  const declared = ERROR_CODES.get(cls.code);
  if (!declared || declared.example) throw new Error(`example of ${cls.code}: not declared, or given twice`);
  declared.example = () => new cls(...args);
}

/** The answer's Retry-After for a wait of `ms`: whole seconds, rounded up, at least 1. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
