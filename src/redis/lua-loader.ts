import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ReplyError, type Redis } from 'ioredis';

/**
 * The loader of the Lua scripts (src/redis/scripts/<name>-<numberOfKeys>.lua): their
 * includes resolved, each one's handle; the handles themselves are in lua-scripts.ts.
 */

/** Where the .lua files are: beside this module (nest-cli.json copies them into dist). */
const DIR = join(__dirname, 'scripts');

/** `name-<numberOfKeys>.lua`, bullmq's convention: the file name says how many KEYS come first. */
const FILE = /^([a-z][a-z-]*)-(\d+)\.lua$/;

/** bullmq's include line: `--- @include "includes/<name>"` (scripts/includes/<name>.lua). */
const INCLUDE = /^--- @include "(includes\/[a-z][a-z-]*)"[ \t]*$/gm;

/**
 * A script's source with its includes resolved, before it is hashed (so EVALSHA, a
 * cluster's every master and the ACL lines see one ordinary script), as bullmq's
 * ScriptLoader resolves them: each include line becomes that file, itself resolved;
 * an include reached twice (two includes that share one) is emitted once, at its first
 * place, so a rule shared by several scripts is written once and defined once in each.
 * Throws, naming the script, for an include that is not there, one named twice in the
 * same file, and a cycle: at start-up, never at a purchase.
 */
export function withIncludes(source: string, from: string, dir = DIR): string {
  return resolve(source, from, dir, new Set(), [from]);
}

/**
 * Any line that names `@include`: one not in INCLUDE's exact form (another quote, a `.lua`,
 * indented inside a block) would stay a comment and fail only at its first EVAL.
 */
const ANY_INCLUDE = /^.*@include.*$/gm;

function resolve(source: string, from: string, dir: string, emitted: Set<string>, stack: string[]): string {
  const odd = [...source.matchAll(ANY_INCLUDE)].map((m) => m[0]).find((line) => !new RegExp(INCLUDE.source).test(line));
  if (odd !== undefined)
    throw new Error(`${from}: not an include line (--- @include "includes/<name>"): ${odd.trim()}`);
  // An include is definitions only: a top-level `return` would end every script that includes it.
  if (stack.length > 1 && /^return\b/m.test(source)) throw new Error(`${from}: an include returns at its top level`);
  const named = [...source.matchAll(INCLUDE)].map((m) => m[1]);
  const twice = named.find((name, i) => named.indexOf(name) !== i);
  if (twice) throw new Error(`${from}: "${twice}" is included twice`);
  return source.replace(INCLUDE, (_line, name: string) => {
    if (stack.includes(name)) throw new Error(`${stack[0]}: include cycle ${[...stack, name].join(' -> ')}`);
    if (emitted.has(name)) return '';
    emitted.add(name);
    const file = join(dir, `${name}.lua`);
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      throw new Error(`${from}: include not found: "${name}" (no ${file})`, { cause: err });
    }
    return resolve(text, name, dir, emitted, [...stack, name]).trimEnd();
  });
}

/** The client a script needs: EVALSHA, and EVAL once per server when it does not know the script yet. */
export type ScriptClient = Pick<Redis, 'evalsha' | 'eval'>;

/**
 * One Lua script of src/redis/scripts. Its file carries its facts: the name and the
 * number of KEYS in the file name, and a header listing KEYS, ARGV and the reply; the
 * Lua it shares with other scripts comes in by `--- @include` (withIncludes()).
 * The type parameters say the same for TypeScript; lua-scripts.spec.ts checks that
 * each file's header and body agree with its name.
 *
 * `run` sends EVALSHA; after a SCRIPT FLUSH or a restart Redis answers NOSCRIPT
 * without running anything, and the script is sent once in full with EVAL (which
 * also caches it), as ioredis' defineCommand and redis-semaphore's createEval do.
 */
export class LuaScript<Keys extends readonly string[], Args extends readonly (string | number)[], Reply> {
  readonly file: string;
  readonly numberOfKeys: number;
  readonly lua: string;
  readonly sha1: string;

  /** `dir`: the scripts folder (another only in the loader's own tests). */
  constructor(
    readonly name: string,
    dir = DIR,
  ) {
    const file = readdirSync(dir).find((f) => FILE.exec(f)?.[1] === name);
    if (!file) throw new Error(`no ${name}-<numberOfKeys>.lua in ${dir}`);
    this.file = file;
    this.numberOfKeys = Number(FILE.exec(file)![2]);
    this.lua = withIncludes(readFileSync(join(dir, file), 'utf8'), file, dir);
    this.sha1 = createHash('sha1').update(this.lua).digest('hex');
  }

  async run(client: ScriptClient, keys: Keys, ...args: Args): Promise<Reply> {
    this.checkKeys(keys);
    try {
      return (await client.evalsha(this.sha1, this.numberOfKeys, ...keys, ...args)) as Reply;
    } catch (err) {
      if (!(err instanceof ReplyError) || !(err as Error).message.startsWith('NOSCRIPT')) throw err;
      return (await client.eval(this.lua, this.numberOfKeys, ...keys, ...args)) as Reply;
    }
  }

  /**
   * EVAL with the whole script, never EVALSHA: one round trip even on a server that
   * has not cached it (after a restart), so it runs right behind whatever this
   * connection sent before it, whether or not anyone reads the replies. For an undo
   * sent after a command timed out.
   */
  async runInFull(client: ScriptClient, keys: Keys, ...args: Args): Promise<Reply> {
    return (await client.eval(...this.inFull(keys, ...args))) as Reply;
  }

  /** EVAL's arguments with the whole script, for a MULTI (where an EVALSHA the server does not know fails at EXEC). */
  inFull(keys: Keys, ...args: Args): [lua: string, numberOfKeys: number, ...keysAndArgs: (string | number)[]] {
    this.checkKeys(keys);
    return [this.lua, this.numberOfKeys, ...keys, ...args];
  }

  private checkKeys(keys: Keys): void {
    if (keys.length !== this.numberOfKeys) {
      throw new Error(`${this.file} takes ${this.numberOfKeys} keys, got ${keys.length}`);
    }
  }
}

/** Every .lua file in the scripts folder, for the check that each one has its LuaScript. */
export function scriptFiles(): string[] {
  return readdirSync(DIR).filter((f) => f.endsWith('.lua'));
}
