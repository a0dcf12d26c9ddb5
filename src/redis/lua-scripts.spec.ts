import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { KeyLayout } from './key-layout';
import { LuaScript, scriptFiles, withIncludes } from './lua-scripts';
import * as scripts from './lua-scripts';

const handles = Object.values(scripts).filter((s) => s instanceof LuaScript);
const SCRIPTS = join(__dirname, 'scripts');

/**
 * A script's facts live in its file: the name and the number of KEYS in the file
 * name (`name-<numberOfKeys>.lua`), the KEYS, ARGV and reply in its header. These
 * checks keep the file, its header, its body and its typed handle in agreement.
 */
describe('Lua scripts (src/redis/scripts/<name>-<numberOfKeys>.lua)', () => {
  it('each file has exactly one typed handle in lua-scripts.ts, and each handle a file', () => {
    expect(handles.map((h) => h.file).sort()).toEqual(scriptFiles().sort());
  });

  it.each(handles.map((h) => [h.file, h] as const))(
    '%s: header and body agree with the key count in its name',
    (_file, script) => {
      // A first line `#!lua flags=...` (Redis 7's script flags) may come before the header.
      const header = /^(?:#!lua[^\n]*\n)?--\[\[([\s\S]*?)]]/.exec(script.lua)?.[1];
      expect(header).toBeDefined();
      const body = script.lua.slice(script.lua.indexOf(']]') + 2);
      const documented = [...header!.matchAll(/KEYS\[(\d+)]/g)].map((m) => Number(m[1]));
      const used = [...body.matchAll(/KEYS\[(\d+)]/g)].map((m) => Number(m[1]));
      const expected = Array.from({ length: script.numberOfKeys }, (_, i) => i + 1);
      expect([...new Set(documented)].sort((a, b) => a - b)).toEqual(expected);
      expect(Math.max(0, ...used)).toBeLessThanOrEqual(script.numberOfKeys);
      // Keys only ever come in through KEYS (never from ARGV), so a cluster can route them;
      // a shard channel (SPUBLISH) is not a key, though it hashes to the keys' slot.
      expect(body).not.toMatch(/redis\.call\('(?!SPUBLISH')\w+',\s*ARGV/);
      expect(header).toMatch(/ARGV\[1]/);
      expect(header).toMatch(/Returns/);
    },
  );

  it('every `<name>-<numberOfKeys>.lua` the code and the docs name is a file here (a script renamed leaves no old name behind)', () => {
    const root = join(__dirname, '../..');
    const files = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? files(join(dir, e.name)) : /\.(ts|lua|md)$/.test(e.name) ? [join(dir, e.name)] : [],
      );
    const named = ['src', 'bench', 'test', 'docs'].flatMap((dir) =>
      // This file's own scripts are made up, in a folder of their own.
      files(join(root, dir))
        .filter((file) => file !== __filename)
        .flatMap((file) =>
          [...readFileSync(file, 'utf8').matchAll(/\b[a-z][a-z0-9-]*-\d+\.lua\b/g)].map(
            ([name]) => `${relative(root, file)}: ${name}`,
          ),
        ),
    );
    const scripts = new Set(scriptFiles());
    expect(named.length).toBeGreaterThan(50);
    expect(named.filter((n) => !scripts.has(n.slice(n.lastIndexOf(' ') + 1)))).toEqual([]);
  });

  it('permission-check-4.lua tries every command the other scripts call', () => {
    const calls = (lua: string) => new Set([...lua.matchAll(/redis\.call\('([A-Z]+)'/g)].map((m) => m[1]));
    const used = new Set(handles.filter((h) => h !== scripts.permissionCheck).flatMap((h) => [...calls(h.lua)]));
    const tried = new Set([...scripts.permissionCheck.lua.matchAll(/try\('([A-Z]+)'/g)].map((m) => m[1]));
    expect([...tried].sort()).toEqual([...used].sort());
  });

  it('resolves each `--- @include` before hashing, once per script, and every include is used', () => {
    const includes = readdirSync(join(SCRIPTS, 'includes')).map((f) => `includes/${f.replace(/\.lua$/, '')}`);
    for (const h of handles) expect(h.lua).not.toMatch(/@include/);
    // Each shared rule is used by some script, and its functions are defined once in each.
    for (const name of includes) {
      const users = handles.filter((h) => h.lua.includes(withIncludes(`--- @include "${name}"`, 'test')));
      expect(users.length).toBeGreaterThan(0);
    }
    for (const h of handles) {
      const defined = [...h.lua.matchAll(/local function (\w+)/g)].map((m) => m[1]);
      expect(defined.filter((f, i) => defined.indexOf(f) !== i)).toEqual([]);
    }
    // order-write includes order-state and idempotency-field; fenced-write names sale-window
    // (which includes clock) beside it: each comes once.
    expect(scripts.fencedWrite.lua.match(/local function nowMs/g)).toHaveLength(1);
    expect(scripts.purchase.lua).toContain('local function windowRefusal');
  });

  it('writes each rule of the sale in one Lua file, an include', () => {
    // The raw files, before includes: where each rule is written.
    const files = [...scriptFiles(), ...readdirSync(join(SCRIPTS, 'includes')).map((f) => `includes/${f}`)];
    const source = new Map(files.map((f) => [f, readFileSync(join(SCRIPTS, f), 'utf8')]));
    const writtenIn = (rule: RegExp) =>
      files.filter((f) =>
        rule.test(
          source
            .get(f)!
            .replace(/--\[\[[\s\S]*?]]/g, '')
            .replace(/--.*$/gm, ''),
        ),
      );
    expect(writtenIn(/redis\.call\('TIME'\)/)).toEqual(['includes/clock.lua']);
    expect(writtenIn(/'P\|' \.\./)).toEqual(['includes/idempotency-field.lua']);
    expect(writtenIn(/'D\|' \.\./)).toEqual(['includes/idempotency-field.lua']);
    // The reservation: its state record, and the one place an order's units leave stock.
    expect(writtenIn(/stateRecord\('R'|'R\|'/)).toEqual(['includes/order-write.lua']);
    expect(writtenIn(/'STRATEGY_MISMATCH'/)).toEqual(['includes/sale-family.lua']);
    // Units leave stock in an order, or as rights in flight to another escrow bucket (src/orders/escrow.ts).
    expect(writtenIn(/redis\.call\('DECRBY'/)).toEqual(['move-out-4.lua', 'includes/order-write.lua']);
  });

  it("builds each product script's KEYS by one function beside its handle, and no caller writes a list", () => {
    const k = new KeyLayout('t:').product('p');
    const exported = scripts as unknown as Record<string, unknown>;
    for (const [name, h] of Object.entries(scripts)) {
      if (!(h instanceof LuaScript) || h.numberOfKeys < 2) continue;
      const build = exported[`${name}Keys`] as ((k: unknown) => string[]) | undefined;
      expect([name, typeof build]).toEqual([name, 'function']);
      const keys = build!(k);
      expect([h.file, keys.length]).toEqual([h.file, h.numberOfKeys]);
      expect(keys.every((key) => Object.values(k).includes(key))).toBe(true);
    }
    // A key list written at a call site (`.run(client, [a, b], ...)`) instead of its builder.
    const src = join(__dirname, '..');
    const walk = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? walk(join(dir, e.name)) : /(?<!\.spec)\.ts$/.test(e.name) ? [join(dir, e.name)] : [],
      );
    const inline = walk(src).filter((f) =>
      /\.(run|runInFull)\(\s*[\w.]+,\s*\[[^\]]*,|\.inFull\(\s*\[/.test(readFileSync(f, 'utf8')),
    );
    expect(inline.map((f) => relative(src, f))).toEqual([]);
  });
});

/**
 * The loader itself, on scripts of its own: bullmq's ScriptLoader rules (an include
 * reached twice is emitted once; one named twice in a file, a missing one and a cycle
 * are errors that name the script), and the hash is of the resolved text.
 */
describe('LuaScript loader (`--- @include`)', () => {
  let dir: string;
  const write = (name: string, text: string) => writeFileSync(join(dir, name), text);
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'lua-loader-'));
    mkdirSync(join(dir, 'includes'));
    write('includes/clock.lua', 'local function now() return 1 end\n');
    write('includes/window.lua', '--- @include "includes/clock"\nlocal function open() return now() > 0 end\n');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('resolves an include reached twice once, at its first place', () => {
    write('both-1.lua', '--- @include "includes/window"\n--- @include "includes/clock"\nreturn KEYS[1]\n');
    const script = new LuaScript('both', dir);
    expect(script.lua.match(/local function now/g)).toHaveLength(1);
    expect(script.lua.indexOf('local function now')).toBeLessThan(script.lua.indexOf('local function open'));
    expect(script.lua).not.toContain('@include');
  });

  it('refuses an include named twice in one file', () => {
    write('twice-1.lua', '--- @include "includes/clock"\n--- @include "includes/clock"\nreturn 1\n');
    expect(() => new LuaScript('twice', dir)).toThrow('twice-1.lua: "includes/clock" is included twice');
  });

  it('names the script and the file for an include that is not there', () => {
    write('lost-1.lua', '--- @include "includes/window"\n--- @include "includes/nowhere"\nreturn 1\n');
    expect(() => new LuaScript('lost', dir)).toThrow(
      `lost-1.lua: include not found: "includes/nowhere" (no ${join(dir, 'includes/nowhere.lua')})`,
    );
  });

  it('refuses a cycle of includes', () => {
    write('includes/a.lua', '--- @include "includes/b"\n');
    write('includes/b.lua', '--- @include "includes/a"\n');
    write('loop-1.lua', '--- @include "includes/a"\nreturn 1\n');
    expect(() => new LuaScript('loop', dir)).toThrow(
      'loop-1.lua: include cycle loop-1.lua -> includes/a -> includes/b -> includes/a',
    );
  });

  it('refuses an include line in another form, which would stay a comment until its first EVAL', () => {
    for (const line of [
      '--- @include "includes/clock.lua"',
      "--- @include 'includes/clock'",
      '---@include "includes/clock"',
      '  --- @include "includes/clock"',
    ]) {
      write('odd-1.lua', `${line}\nreturn 1\n`);
      expect(() => new LuaScript('odd', dir)).toThrow(`odd-1.lua: not an include line`);
    }
  });

  it('refuses an include that returns at its top level', () => {
    write('includes/early.lua', 'local x = 1\nreturn x\n');
    write('early-1.lua', '--- @include "includes/early"\nreturn 2\n');
    expect(() => new LuaScript('early', dir)).toThrow('includes/early: an include returns at its top level');
  });

  it('hashes the resolved script: an include changed is a new sha1', () => {
    write('user-1.lua', '--- @include "includes/window"\nreturn KEYS[1]\n');
    const before = new LuaScript('user', dir);
    write('includes/clock.lua', 'local function now() return 2 end\n');
    const after = new LuaScript('user', dir);
    expect(after.sha1).not.toBe(before.sha1);
    expect(after.lua).toContain('return 2');
  });
});
