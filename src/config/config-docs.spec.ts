import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CONFIG_ENV_NAMES } from './app-config';
import { settingsTable, withSettingsTables } from './config-docs';

const PAGE = join(__dirname, '../../docs/configuration.md');

describe("docs/configuration.md's tables", () => {
  it('are exactly what the declarations generate (regenerate them as the page says)', () => {
    const page = readFileSync(PAGE, 'utf8');
    // Each table's place, once: a page without one would be left as it is.
    for (const kind of ['service', 'lessons'])
      expect([kind, page.split(`<!-- settings:${kind} -->`).length - 1]).toEqual([kind, 1]);
    expect(page).toBe(withSettingsTables(page));
  });

  it('list every variable the app reads once, the lesson switches apart from the service', () => {
    const page = readFileSync(PAGE, 'utf8');
    const variables = (table: string) => [...table.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]);
    const onPage = (kind: string) =>
      variables(page.split(`<!-- settings:${kind} -->`)[1]?.split('<!-- /settings -->')[0] ?? '');
    const service = onPage('service');
    const lessons = onPage('lessons');
    expect(service).toEqual(variables(settingsTable('service')));
    expect([...service, ...lessons].sort()).toEqual([...CONFIG_ENV_NAMES].sort());
    expect(new Set(CONFIG_ENV_NAMES).size).toBe(CONFIG_ENV_NAMES.length);
    expect(lessons).toEqual(['ALLOW_UNSAFE', 'SALE_CLOCK', 'FAULT_STOP_AT', 'FAULT_CLOCK_SKEW_MS']);
    expect(service).toContain('LOCK_STRATEGY');
  });

  it('show each bounded integer with its bounds, from the declaration that checks them', () => {
    expect(settingsTable('service')).toContain(
      '| `LOCK_TTL_MS` | `10000` | lock TTL: the longest a crashed holder can block a product (100..3,600,000) |',
    );
  });
});
