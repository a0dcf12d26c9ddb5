import { mkdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { CHROMIUM_ENV, findChromium } from '../../scripts/chromium';

export type { Browser, Page } from 'playwright-core';

const ROOT = join(__dirname, '..', '..');

/** Where browser tests save screenshots (gitignored, under .data/). */
export const SCREENSHOTS_DIR = join(ROOT, '.data', 'screenshots');

/**
 * Headless Chromium on a machine with no internet: without the networking flags it
 * stalls on refused connections (component updates, sync, QUIC probes), and as root
 * or in a container it runs only without the sandbox.
 */
export const CHROMIUM_ARGS: readonly string[] = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Launching on two loaded cores has taken over a second; a cold disk can take far more. */
const LAUNCH_TIMEOUT_MS = 60_000;

/** The Chromium the browser tests run ($SECKILL_CHROMIUM, set by `npm test`; else /usr/bin/chromium or on PATH), or null. */
export function chromiumPath(): string | null {
  return findChromium();
}

/**
 * Headless Chromium at `executablePath`. playwright-core never downloads a browser
 * when given one, and gives each launch a fresh, empty --user-data-dir in the temp
 * folder, which close() removes.
 */
export function launchBrowser(executablePath: string | null = chromiumPath()): Promise<Browser> {
  if (!executablePath) throw new Error(`no Chromium: ${howToGetChromium()}`);
  return chromium.launch({ executablePath, headless: true, args: [...CHROMIUM_ARGS], timeout: LAUNCH_TIMEOUT_MS });
}

/**
 * A describe block whose tests get one browser, launched before them and closed after
 * them. Without Chromium it registers one skipped test whose name says why, so a run
 * without a browser shows it rather than passing in silence.
 */
export function describeWithBrowser(name: string, fn: (browser: () => Browser) => void): void {
  const executablePath = chromiumPath();
  if (!executablePath) {
    describe(name, () => {
      it.skip(`needs Chromium: ${howToGetChromium()}`, () => undefined);
    });
    return;
  }
  describe(name, () => {
    let browser: Browser | undefined;
    beforeAll(async () => {
      const start = Date.now();
      browser = await launchBrowser(executablePath);
      process.stderr.write(
        `[browser] Chromium ${browser.version()} (${executablePath}) started in ${Date.now() - start} ms\n`,
      );
    }, LAUNCH_TIMEOUT_MS);
    afterAll(async () => {
      await browser?.close();
    });
    fn(() => {
      if (!browser) throw new Error('the browser did not start (see beforeAll)');
      return browser;
    });
  });
}

/** Saves a full-page screenshot as `.data/screenshots/<name>.png`, says where in one line, and returns the path. */
export async function saveScreenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOTS_DIR, { recursive: true });
  const file = join(SCREENSHOTS_DIR, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  process.stderr.write(`[browser] screenshot: ${relative(process.cwd(), file)}\n`);
  return file;
}

/**
 * The icon the page names (`<link rel="icon">`), fetched from the page: its status and
 * type, or null when it names none. Headless Chromium asks for no icon by itself; a
 * browser does, and a 404 is an error in its console.
 */
export function pageIcon(page: Page): Promise<{ status: number; type: string | null } | null> {
  return page.evaluate(async () => {
    const link = (globalThis as any).document.querySelector('link[rel~="icon"]');
    if (!link) return null;
    const res = await fetch(link.href);
    return { status: res.status, type: res.headers.get('content-type') };
  });
}

function howToGetChromium(): string {
  const chosen = process.env[CHROMIUM_ENV];
  return chosen
    ? `${CHROMIUM_ENV}=${chosen} is not an executable file`
    : "no Chromium at /usr/bin/chromium or on PATH (npm test installs Debian's chromium as root; or set SECKILL_CHROMIUM)";
}
