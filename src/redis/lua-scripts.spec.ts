import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { LuaScript, scriptFiles, withIncludes } from './lua-script';
import * as scripts from './lua-scripts';

const handles = Object.values(scripts).filter((s) => s instanceof LuaScript);

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

  it('permission-check-4.lua tries every command the other scripts call', () => {
    const calls = (lua: string) => new Set([...lua.matchAll(/redis\.call\('([A-Z]+)'/g)].map((m) => m[1]));
    const used = new Set(handles.filter((h) => h !== scripts.permissionCheck).flatMap((h) => [...calls(h.lua)]));
    const tried = new Set([...scripts.permissionCheck.lua.matchAll(/try\('([A-Z]+)'/g)].map((m) => m[1]));
    expect([...tried].sort()).toEqual([...used].sort());
  });

  it('resolves each `--- @include` before hashing, once per script, and every include is used', () => {
    const includes = readdirSync(join(__dirname, 'scripts', 'includes')).map(
      (f) => `includes/${f.replace(/\.lua$/, '')}`,
    );
    for (const h of handles) expect(h.lua).not.toMatch(/^--- @include/m);
    // Each shared rule is used by some script, and its functions are defined once in each.
    for (const name of includes) {
      const users = handles.filter((h) => h.lua.includes(withIncludes(`--- @include "${name}"`)));
      expect(users.length).toBeGreaterThan(0);
    }
    const twice = withIncludes('--- @include "includes/sale-window"\n--- @include "includes/sale-window"');
    expect(twice.match(/local function windowRefusal/g)).toHaveLength(1);
    expect(scripts.purchase.lua).toContain('local function windowRefusal');
  });
});
