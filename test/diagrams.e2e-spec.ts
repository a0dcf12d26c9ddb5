import { join } from 'node:path';
import { type Diagram, mermaidBlocks } from '../bench/lab/docs';
import { describeWithBrowser, type Page, saveScreenshot } from './helpers/browser';

const ROOT = join(__dirname, '..');
const MERMAID = join(ROOT, 'node_modules', 'mermaid', 'dist', 'mermaid.min.js');

/**
 * The diagrams the docs promise: strategies.md's race under `none` and `lock`, the batch
 * and the fence (docs/lock.md links to them), and one each in door.md, settlement.md and
 * scaling.md.
 */
const AT_LEAST = { total: 7, 'docs/strategies.md': 4 } as const;

const diagrams = mermaidBlocks(ROOT);

describe('Mermaid diagrams in the docs', () => {
  it('has the diagrams the docs promise', () => {
    const count = (file: string) => diagrams.filter((d) => d.file === file).length;
    expect(diagrams.length).toBeGreaterThanOrEqual(AT_LEAST.total);
    expect(count('docs/strategies.md')).toBeGreaterThanOrEqual(AT_LEAST['docs/strategies.md']);
  });
});

describeWithBrowser('Mermaid diagrams render in headless Chromium', (browser) => {
  let page: Page;
  /** Anything the page tried to fetch: the page is offline by design, mermaid is inlined. */
  const requests: string[] = [];
  const pageErrors: string[] = [];

  beforeAll(async () => {
    page = await browser().newPage({ viewport: { width: 1000, height: 800 } });
    page.on('pageerror', (err) => pageErrors.push(err.message));
    await page.route('**/*', (route) => {
      requests.push(route.request().url());
      return route.abort();
    });
    await page.setContent('<!doctype html><html><head><meta charset="utf-8"></head><body></body></html>');
    await page.addScriptTag({ path: MERMAID });
    await page.evaluate(() => {
      // suppressErrorRendering: a syntax error throws instead of drawing a "bomb" SVG.
      (globalThis as any).mermaid.initialize({ startOnLoad: false, suppressErrorRendering: true });
    });
  });

  afterAll(async () => {
    await page?.close();
  });

  it.each(diagrams.map((d, i) => [d.where, d, i] as const))('%s renders to an SVG', async (_where, diagram, i) => {
    const result = await render(page, `diagram-${i}`, diagram);
    expect(result.error).toBeUndefined();
    expect(result.svg).toMatch(/^<svg[\s>]/);
    // Drawn, not just parsed: a diagram with messages lays out to a real size.
    expect(result.width).toBeGreaterThan(100);
    expect(result.height).toBeGreaterThan(100);
  });

  it('saves a screenshot of every diagram, fetched nothing and raised no page error', async () => {
    await saveScreenshot(page, 'diagrams');
    expect(requests).toEqual([]);
    expect(pageErrors).toEqual([]);
  });
});

/** Renders one diagram with mermaid.render and appends it, under its file:line, to the page. */
function render(
  page: Page,
  id: string,
  diagram: Diagram,
): Promise<{ svg?: string; error?: string; width: number; height: number }> {
  return page.evaluate(
    async ({ id, where, text }) => {
      const doc = (globalThis as any).document;
      const section = doc.createElement('section');
      const title = doc.createElement('h3');
      title.textContent = where;
      section.append(title);
      doc.body.append(section);
      try {
        const { svg } = await (globalThis as any).mermaid.render(id, text);
        section.insertAdjacentHTML('beforeend', svg);
        const box = section.querySelector('svg').getBoundingClientRect();
        return { svg: svg as string, width: box.width as number, height: box.height as number };
      } catch (err) {
        title.textContent = `${where}: ${String(err)}`;
        return { error: `${where}: ${(err as Error)?.message ?? String(err)}`, width: 0, height: 0 };
      }
    },
    { id, where: diagram.where, text: diagram.text },
  );
}
