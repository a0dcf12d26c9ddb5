import { DOOR_CONFIG } from '../door/door.config';
import { LOCKS_CONFIG } from '../locks/locks.config';
import { ORDERS_CONFIG } from '../orders/orders.config';
import { REDIS_CONFIG } from '../redis/redis.config';
import { SETTLEMENT_CONFIG } from '../settlement/settlement.config';
import { LESSONS_CONFIG } from '../settings/lessons.config';
import { ConfigError, ConfigsOf, Env, Intersection, Section, Setting } from '../settings/setting';
import {
  LOCK_STRATEGY_NAMES,
  LockStrategyName,
  STRATEGY_CONFIG,
  strategyFamily,
  UNSAFE_STRATEGIES,
} from '../settings/strategy.config';
import { TELEMETRY_CONFIG } from '../telemetry/telemetry.config';
import { listenProblem, SERVER_CONFIG } from './server.config';

/**
 * Environment -> typed, validated, frozen configuration: every section the features
 * declare (`<feature>.config.ts`), read at boot. Frozen defaults plus validated env (the
 * node-redlock defaultSettings pattern): a bad value stops the app with one line per
 * bad variable, all of them at once, long before the first buyer arrives.
 */

/** Every section, in the order their variables are read, named in errors and listed in docs/configuration.md. */
export const CONFIG_SECTIONS = [
  SERVER_CONFIG,
  REDIS_CONFIG,
  STRATEGY_CONFIG,
  LOCKS_CONFIG,
  DOOR_CONFIG,
  TELEMETRY_CONFIG,
  ORDERS_CONFIG,
  SETTLEMENT_CONFIG,
  LESSONS_CONFIG,
] as const;

type Sections = (typeof CONFIG_SECTIONS)[number];
type AllSettings = Intersection<Sections['settings']>;
/** The whole configuration: every section's values, inferred from their declarations. */
export type AppConfig = ConfigsOf<typeof CONFIG_SECTIONS>;

const SETTINGS = Object.assign({}, ...CONFIG_SECTIONS.map((s) => s.settings)) as AllSettings;
const ENTRIES = Object.entries(SETTINGS) as [keyof AppConfig, Setting<unknown>][];

/** The defaults of the settings that have a plain one (bench/ and the compose file's tests read them). */
export const CONFIG_DEFAULTS = Object.freeze(
  Object.fromEntries(ENTRIES.filter(([, s]) => 'fallback' in s).map(([key, s]) => [key, s.fallback])),
) as { readonly [K in keyof AllSettings as AllSettings[K] extends { fallback: unknown } ? K : never]: AppConfig[K] };

/** Every environment variable the app reads; docker-compose.yml is checked against it. */
export const CONFIG_ENV_NAMES: readonly string[] = ENTRIES.flatMap(([, s]) => [
  s.env,
  ...(s.companions ?? []).map(([env]) => env),
]);

/** The values of one section, out of the whole configuration: what its token provides. */
export function sliceOf(section: Section, config: AppConfig): Readonly<Record<string, unknown>> {
  return Object.freeze(Object.fromEntries(Object.keys(section.settings).map((k) => [k, config[k as keyof AppConfig]])));
}

export function loadConfig(env: Env): AppConfig {
  const { config, problems } = readConfig(env);
  if (problems.length > 0) throw ConfigError.all(problems);
  return config;
}

/**
 * loadConfig for the process that listens (main.ts), with what only this machine can
 * tell: whether HOST is an address it can listen on. A name that does not resolve, or
 * an address that is not this machine's, is one more line of the same error, where
 * listen() would have failed with a stack trace after the app was built.
 */
export async function loadServerConfig(env: Env): Promise<AppConfig> {
  const { config, problems } = readConfig(env);
  if (!problems.some((p) => p.variable === 'HOST')) {
    const problem = await listenProblem(config.host);
    if (problem) problems.push(problem);
  }
  if (problems.length > 0) throw ConfigError.all(problems);
  return config;
}

/**
 * Every variable read, each bad one noted and read on as if unset, so that one start
 * names them all. `config` is whole only when `problems` is empty.
 */
function readConfig(env: Env): { config: AppConfig; problems: ConfigError[] } {
  const problems: ConfigError[] = [];
  const values: Record<string, unknown> = {};
  for (const [key, setting] of ENTRIES) {
    const value = env[setting.env]?.trim();
    try {
      values[key] = setting.read(value === '' ? undefined : value, env);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      problems.push(err);
    }
  }
  const config = values as Partial<AppConfig>;
  // The rules between variables, each judged only when the variables it reads are
  // valid (an invalid one is named once, by its own line).
  const refuse = (variable: string, detail: string) => problems.push(new ConfigError(variable, detail));
  const production = env.NODE_ENV?.trim().toLowerCase() === 'production';
  if (config.lockStrategy === 'redlock' && config.redlockUrls?.length === 0) {
    refuse(
      'REDLOCK_URLS',
      'is required with LOCK_STRATEGY=redlock: comma-separated URLs of independent Redis nodes (3 or 5); `npm start` starts 3 for you',
    );
  }
  if (config.lockStrategy && UNSAFE_STRATEGIES.includes(config.lockStrategy) && config.allowUnsafe === false) {
    refuse(
      'LOCK_STRATEGY',
      `"${config.lockStrategy}" can oversell and runs only as a demonstration: set ALLOW_UNSAFE=1 to allow it`,
    );
  }
  if (config.saleClock === 'app' && config.allowUnsafe === false) {
    refuse(
      'SALE_CLOCK',
      '"app" judges the sale window by this process\'s clock, which can open the sale early: set ALLOW_UNSAFE=1 to allow it',
    );
  }
  const faults = [
    ['FAULT_STOP_AT', config.faultStopAt, 'makes the app stop itself', 'the fault suite'],
    ['FAULT_CLOCK_SKEW_MS', config.faultClockSkewMs, "skews the app's clock", 'the tests'],
  ] as const;
  for (const [variable, value, what, whom] of faults) {
    // Production first: with NODE_ENV=production no other setting makes it acceptable.
    if (value && production) refuse(variable, `${what} and is never accepted with NODE_ENV=production`);
    else if (value && config.allowUnsafe === false) {
      refuse(variable, `${what} and is for ${whom} only: set ALLOW_UNSAFE=1 to allow it`);
    }
  }
  return { config: Object.freeze(config) as AppConfig, problems };
}

// What callers outside src/ (bench/, test/) have always imported from here.
export { ConfigError, LOCK_STRATEGY_NAMES, strategyFamily, UNSAFE_STRATEGIES };
export type { LockStrategyName };
