import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ReplyError, type Redis } from 'ioredis';

/** Where the .lua files are: beside this module (nest-cli.json copies them into dist). */
const DIR = join(__dirname, 'scripts');

/** `name-<numberOfKeys>.lua`, bullmq's convention: the file name says how many KEYS come first. */
const FILE = /^([a-z][a-z-]*)-(\d+)\.lua$/;

/** bullmq's include line: `--- @include "includes/<name>"` (scripts/includes/<name>.lua). */
const INCLUDE = /^--- @include "(includes\/[a-z][a-z-]*)"[ \t]*$/gm;

/**
 * A script's source with its includes resolved, before it is hashed (so EVALSHA, a
 * cluster's every master and the ACL lines see one ordinary script): each include line
 * becomes that file, once per script however often it is named, so a rule shared by
 * several scripts is written once.
 */
export function withIncludes(source: string, included = new Set<string>()): string {
  return source.replace(INCLUDE, (_line, name: string) => {
    if (included.has(name)) return '';
    included.add(name);
    return withIncludes(readFileSync(join(DIR, `${name}.lua`), 'utf8'), included).trimEnd();
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

  constructor(readonly name: string) {
    const file = readdirSync(DIR).find((f) => FILE.exec(f)?.[1] === name);
    if (!file) throw new Error(`no ${name}-<numberOfKeys>.lua in ${DIR}`);
    this.file = file;
    this.numberOfKeys = Number(FILE.exec(file)![2]);
    this.lua = withIncludes(readFileSync(join(DIR, file), 'utf8'));
    this.sha1 = createHash('sha1').update(this.lua).digest('hex');
  }

  async run(client: ScriptClient, keys: Keys, ...args: Args): Promise<Reply> {
    if (keys.length !== this.numberOfKeys) {
      throw new Error(`${this.file} takes ${this.numberOfKeys} keys, got ${keys.length}`);
    }
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
    return (await client.eval(this.lua, this.numberOfKeys, ...keys, ...args)) as Reply;
  }
}

/** Every .lua file in the scripts folder, for the check that each one has its LuaScript. */
export function scriptFiles(): string[] {
  return readdirSync(DIR).filter((f) => f.endsWith('.lua'));
}
