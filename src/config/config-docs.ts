import { CONFIG_SECTIONS } from './app-config';

/**
 * docs/configuration.md's tables, generated from the declarations: the service's settings
 * between `<!-- settings:service -->` and `<!-- /settings -->`, the lesson and fault
 * switches between `<!-- settings:lessons -->` and the same end. `withSettingsTables`
 * gives the page with both written anew; a spec checks the page is what it gives.
 * After a change to a declaration: `npm run build` then
 * `node -e "const f='docs/configuration.md',fs=require('fs');fs.writeFileSync(f,require('./dist/src/config/config-docs').withSettingsTables(fs.readFileSync(f,'utf8')))"`.
 */
export function settingsTable(kind: 'service' | 'lessons'): string {
  const rows = CONFIG_SECTIONS.filter((s) => s.lessons === (kind === 'lessons')).flatMap((s) =>
    Object.values(s.settings).flatMap((setting) => [
      [setting.env, setting.shown, setting.doc] as const,
      ...(setting.companions ?? []),
    ]),
  );
  return [
    '| variable | default | meaning |',
    '|---|---|---|',
    ...rows.map(([env, shown, doc]) => `| \`${env}\` | ${shown} | ${doc} |`),
  ].join('\n');
}

export function withSettingsTables(markdown: string): string {
  return markdown.replace(
    // An empty place (the two markers alone) is filled as a written one is.
    /(<!-- settings:(service|lessons) -->\n)[^]*?(<!-- \/settings -->)/g,
    (_all, open: string, kind: 'service' | 'lessons', close: string) => `${open}${settingsTable(kind)}\n${close}`,
  );
}
