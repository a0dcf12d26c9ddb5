import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { CONFIG_DEFAULTS, CONFIG_ENV_NAMES, loadConfig } from '../src/config/app-config';

/** Docker cannot run here, so the file itself is checked against the config schema. */
describe('docker-compose.yml', () => {
  const compose = parse(readFileSync(join(__dirname, '..', 'docker-compose.yml'), 'utf8'));

  it('has exactly the services redis and app', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['app', 'redis']);
  });

  it('runs the official Redis image on 6379 with AOF on', () => {
    expect(compose.services.redis.image).toMatch(/^redis:\d/);
    expect(compose.services.redis.ports).toContain('6379:6379');
    expect(compose.services.redis.command.join(' ')).toContain('--appendonly yes');
  });

  it('gives app only variables the config knows, pointing at the redis service', () => {
    const env: Record<string, string> = compose.services.app.environment;
    for (const name of Object.keys(env)) expect(CONFIG_ENV_NAMES).toContain(name);
    expect(env.REDIS_URL).toBe('redis://redis:6379');
    expect(compose.services.app.depends_on).toHaveProperty('redis');
    expect(compose.services.app.build).toBe('.');
  });

  it('has values the config accepts once compose fills in the defaults', () => {
    // ${VAR:-default} -> default; ${VAR:?msg} -> a value the user must give.
    const resolved = Object.fromEntries(
      Object.entries(compose.services.app.environment as Record<string, string>).map(([name, value]) => [
        name,
        String(value)
          .replace(/\$\{\w+:-([^}]*)\}/g, '$1')
          .replace(/\$\{\w+:\?[^}]*\}/g, 'a-token-the-user-supplies'),
      ]),
    );
    expect(() => loadConfig(resolved)).not.toThrow();
    expect(loadConfig(resolved).port).toBe(3000);
    // Compose's default strategy is the app's, not a second opinion.
    expect(loadConfig(resolved).lockStrategy).toBe(CONFIG_DEFAULTS.lockStrategy);
  });
});
