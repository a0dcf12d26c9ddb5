import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';

const ROOT = join(__dirname, '..');

/** README.md and every page of docs/: the files whose links a reader follows. */
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
];

interface Link {
  /** `file:line`, for a failure message a reader can follow. */
  readonly where: string;
  readonly file: string;
  readonly target: string;
}

/** The lines of a Markdown file outside fenced code blocks, with their line numbers. */
function proseLines(file: string): { line: string; n: number }[] {
  const out: { line: string; n: number }[] = [];
  let fence: string | undefined;
  readFileSync(join(ROOT, file), 'utf8')
    .split('\n')
    .forEach((line, i) => {
      const opens = /^\s*(```|~~~)/.exec(line);
      if (opens) fence = fence === undefined ? opens[1] : line.trim().startsWith(fence) ? undefined : fence;
      else if (fence === undefined) out.push({ line, n: i + 1 });
    });
  return out;
}

/**
 * GitHub's anchor for a heading (github-slugger): the text as rendered (code spans and
 * links reduced to their text), lower case, punctuation and symbols dropped, each space
 * a hyphen.
 */
export function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\s_-]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors a page offers: each heading's slug (repeats get -1, -2, ...), and any <a id>. */
function anchorsOf(file: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const { line } of proseLines(file)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      const base = slug(heading[1]);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      anchors.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const [, id] of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(id);
  }
  return anchors;
}

/** Every inline link and image of a page, outside code blocks and code spans. */
function linksOf(file: string): Link[] {
  return proseLines(file).flatMap(({ line, n }) =>
    [...line.replace(/`[^`]*`/g, '').matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map(
      ([, target]) => ({ where: `${file}:${n}`, file, target }),
    ),
  );
}

/** Why a relative link is broken, or undefined when it leads somewhere. */
function problemOf(link: Link): string | undefined {
  const [path, anchor] = link.target.split('#', 2);
  const file = path === '' ? link.file : normalize(join(dirname(link.file), decodeURIComponent(path)));
  if (file.startsWith('..')) return `${link.target} leads out of the repository`;
  if (!existsSync(join(ROOT, file))) return `${link.target}: no file ${file}`;
  if (anchor === undefined || !file.endsWith('.md')) return undefined;
  if (!anchorsOf(file).has(anchor)) return `${link.target}: ${file} has no heading #${anchor}`;
  return undefined;
}

const links = PAGES.flatMap(linksOf);
/** Links to another site are not followed: only the repository's own pages and files. */
const relativeLinks = links.filter((l) => !/^[a-z][a-z0-9+.-]*:/i.test(l.target));

describe('links in README.md and docs/', () => {
  it('turns headings into the anchors GitHub gives them', () => {
    expect(slug('The default: `fenced`, and the textbook `lock`')).toBe('the-default-fenced-and-the-textbook-lock');
    expect(slug('`redlock` — Redlock over independent nodes')).toBe('redlock--redlock-over-independent-nodes');
    expect(slug('Slot migrated mid-sale (`cluster-slot-moved-lock|fenced`)')).toBe(
      'slot-migrated-mid-sale-cluster-slot-moved-lockfenced',
    );
    expect(slug('Versions, and why')).toBe('versions-and-why');
  });

  it('reads the links of every page', () => {
    expect(PAGES).toContain('docs/api.md');
    // The README's map links every page of docs/.
    const fromReadme = relativeLinks.filter((l) => l.file === 'README.md').map((l) => l.target);
    for (const page of PAGES.filter((p) => p !== 'README.md')) expect(fromReadme).toContain(page);
    expect(relativeLinks.some((l) => l.target.includes('#'))).toBe(true);
  });

  it('leads every relative link to a file that exists, and every anchor to a heading there', () => {
    const broken = relativeLinks.flatMap((l) => {
      const problem = problemOf(l);
      return problem ? [`${l.where}: ${problem}`] : [];
    });
    expect(broken).toEqual([]);
  });

  it('never links into the repository by an absolute path', () => {
    const absolute = relativeLinks.filter((l) => l.target.startsWith('/')).map((l) => `${l.where}: ${l.target}`);
    expect(absolute).toEqual([]);
  });
});
