import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '..');

/**
 * What `npm ci` runs besides installing. swagger-ui-dist (for /docs) depends on
 * @scarf/scarf, whose postinstall reports the install to an analytics service unless
 * the root package.json opts out (scarf's documented `scarfSettings.enabled: false`).
 */
describe('the install', () => {
  it('opts out of install-time analytics (scarfSettings.enabled false in package.json)', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    expect(pkg.scarfSettings).toEqual({ enabled: false });
  });
});
