import type { FactoryProvider } from '@nestjs/common';

/**
 * One setting, declared once: its environment variable, how it reads (its type, its
 * default, its bounds), and the line docs/configuration.md gives it. Each feature
 * declares its own section of them (`<feature>.config.ts`, the NestJS per-feature
 * config: one injection token per section); src/config/ puts the sections together and
 * derives the whole AppConfig type, the defaults, the variable list and the docs table.
 */
export type Env = Readonly<Record<string, string | undefined>>;

/**
 * Invalid configuration: one line per invalid variable, `<VARIABLE> <what is wrong>`,
 * this one's first. loadConfig throws one holding every line it found.
 */
export class ConfigError extends Error {
  readonly lines: readonly string[];

  constructor(
    readonly variable: string,
    readonly detail: string,
    others: readonly ConfigError[] = [],
  ) {
    const lines = [`${variable} ${detail}`, ...others.flatMap((e) => e.lines)];
    super(lines.join('\n'));
    this.lines = lines;
    this.name = 'ConfigError';
  }

  /** One error naming every one of `problems` (at least one), in their order. */
  static all(problems: readonly ConfigError[]): ConfigError {
    const [first, ...others] = problems;
    return new ConfigError(first.variable, first.detail, others);
  }
}

/** A variable read by another one's setting (BUYER_AUTH_ISSUER by BUYER_AUTH's): its name, default and doc. */
export type Companion = readonly [env: string, shown: string, doc: string];

export interface Setting<T> {
  readonly env: string;
  /** The default, as docs/configuration.md shows it. */
  readonly shown: string;
  /** docs/configuration.md's line for it (an integer's bounds are added to it). */
  readonly doc: string;
  /** `value`: the variable with its blanks trimmed, undefined when unset or blank. Throws ConfigError. */
  readonly read: (value: string | undefined, env: Env) => T;
  readonly fallback?: T;
  readonly companions?: readonly Companion[];
}
/** A setting whose unset value is a plain default (CONFIG_DEFAULTS holds it). */
export type Defaulted<T> = Setting<T> & { readonly fallback: T };

type Settings = Readonly<Record<string, Setting<unknown>>>;
export interface Section<S extends Settings = Settings> {
  readonly name: string;
  /** The injection token of this section's values. */
  readonly token: symbol;
  /** A lesson or fault switch (docs/configuration.md lists them apart from the service's settings). */
  readonly lessons: boolean;
  readonly settings: S;
}
/** The values a section reads: the type its consumers take, inferred from the declarations. */
export type ConfigOf<X extends Section> = { readonly [K in keyof X['settings']]: ReturnType<X['settings'][K]['read']> };

/** The values of several sections in one: what a view of them provides. */
export type ConfigsOf<S extends readonly Section[]> = Intersection<S[number] extends infer U ? ValuesOf<U> : never>;
type ValuesOf<U> = U extends Section ? ConfigOf<U> : never;
export type Intersection<U> = (U extends unknown ? (u: U) => void : never) extends (i: infer I) => void ? I : never;

/**
 * One token for a class that reads several sections (a purchase path reads the strategy,
 * the lock's wait and the sale clock): their values merged. The module of the class
 * lists `provider`; each section stays declared once, by its feature.
 */
export function configView<const S extends readonly Section[]>(name: string, ...sections: S) {
  const token = Symbol(`${name} config`);
  const provider: FactoryProvider = {
    provide: token,
    inject: sections.map((s) => s.token),
    useFactory: (...slices: object[]): unknown => Object.freeze(Object.assign({}, ...slices)),
  };
  return { token, provider, sections };
}

export function section<S extends Settings>(
  name: string,
  settings: S,
  kind: 'service' | 'lessons' = 'service',
): Section<S> {
  return { name, token: Symbol(`${name} config`), lessons: kind === 'lessons', settings };
}

/** A setting read by a rule of its own (a URL, a list, a key); `shown`: what it is when unset. */
export function setting<T>(env: string, shown: string, doc: string, read: Setting<T>['read']): Setting<T> {
  return { env, shown, doc, read };
}

/** A setting with a plain default and a rule of its own for a set value. */
export function defaulted<T extends string | number>(
  env: string,
  fallback: T,
  doc: string,
  read: (value: string) => T,
): Defaulted<T> {
  return {
    env,
    shown: `\`${fallback}\``,
    doc,
    fallback,
    read: (value) => (value === undefined ? fallback : read(value)),
  };
}

export function int(
  env: string,
  fallback: number,
  [min, max]: readonly [number, number],
  doc: string,
): Defaulted<number> {
  const range = `${min.toLocaleString('en-US')}..${max.toLocaleString('en-US')}`;
  return {
    env,
    shown: `\`${fallback}\``,
    doc: `${doc} (${range})`,
    fallback,
    read: (value) => {
      if (value === undefined) return fallback;
      if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
        throw new ConfigError(env, `must be an integer from ${min} to ${max}, got "${value}"`);
      }
      return Number(value);
    },
  };
}

export function flag(env: string, fallback: boolean, doc: string): Defaulted<boolean> {
  return {
    env,
    shown: fallback ? '`1`' : '`0`',
    doc,
    fallback,
    read: (raw) => {
      const value = raw?.toLowerCase();
      if (value === undefined) return fallback;
      if (value === '1' || value === 'true') return true;
      if (value === '0' || value === 'false') return false;
      throw new ConfigError(env, `must be 1, 0, true or false, got "${value}"`);
    },
  };
}

export function oneOf<T extends string>(env: string, allowed: readonly T[], fallback: T, doc: string): Defaulted<T> {
  return {
    env,
    shown: `\`${fallback}\``,
    doc,
    fallback,
    read: (value) => {
      if (value === undefined) return fallback;
      if (!(allowed as readonly string[]).includes(value)) {
        throw new ConfigError(env, `must be one of ${allowed.join(', ')}, got "${value}"`);
      }
      return value as T;
    },
  };
}
