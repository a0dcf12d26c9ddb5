/**
 * The lab's lessons, read from the docs at run time so the page says what the docs
 * say: every strategy of docs/strategies.md, every fault scenario of the suite's
 * registry (bench/faults/run.ts) under the heading of docs/faults.md that names it,
 * and the shard lessons (one product on one shard, on three) under the section of
 * docs/scaling.md that runs each (`npm run lab:shards -- --buckets N`), grouped as the docs
 * group them, each with its paragraph, its diagrams and its reading guide. Anything the
 * docs do not (yet) name is still listed, under "Not in the docs".
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LOCK_STRATEGY_NAMES } from '../../src/config/app-config';
import { SCENARIO_NAMES } from '../faults/run';
import { expandName, inlineHtml, lessonOf, mermaidIn, namesIn, Section, sectionsOf } from './docs';
import { faultGuide, GuideEntry, shardGuide, STRATEGY_GUIDE } from './reading-guide';

export type LessonKind = 'strategy' | 'fault' | 'shards';

export interface Lesson {
  /** `strategy:<name>`, `fault:<first scenario>` or `shards:<buckets>`. */
  readonly id: string;
  readonly kind: LessonKind;
  /** The heading, as HTML. */
  readonly title: string;
  /** The strategy, the scenarios the lesson runs (a fault's variants), or `buckets: N`. */
  readonly names: readonly string[];
  /** A shard lesson's escrow buckets (1: the product on one shard). */
  readonly buckets?: number;
  /** One paragraph, as HTML. */
  readonly lesson: string;
  /** Mermaid source of each diagram the docs draw for it. */
  readonly diagrams: readonly string[];
  /** Where the docs say it: `docs/strategies.md#slug`. */
  readonly doc: string;
  readonly guide: readonly GuideEntry[];
}

export interface LessonGroup {
  readonly kind: LessonKind;
  readonly title: string;
  readonly intro: string;
  readonly lessons: Lesson[];
}

const read = (root: string, file: string) => sectionsOf(file, readFileSync(join(root, file), 'utf8'));
const diagramsOf = (s: Section) => mermaidIn(s.file, s.body, s.line + 1).map((d) => d.text);
const docLink = (s: Section) => `${s.file}#${s.slug}`;
const title = (s: Section) => inlineHtml(s.title);

/** The strategy lessons: each `### \`name\`` of docs/strategies.md, in the group of its `##`. */
export function strategyGroups(root: string): LessonGroup[] {
  const sections = read(root, 'docs/strategies.md');
  const known = LOCK_STRATEGY_NAMES as readonly string[];
  const groups: LessonGroup[] = [];
  const byName = new Map<string, { lesson: Lesson; diagrams: string[] }>();
  let group: LessonGroup | undefined;
  for (const s of sections) {
    if (s.level === 2) {
      group = { kind: 'strategy', title: title(s), intro: inlineHtml(lessonOf(s.body)), lessons: [] };
      groups.push(group);
      continue;
    }
    const name = namesIn(s.title)[0];
    if (s.level !== 3 || !group || !known.includes(name) || byName.has(name)) continue;
    const diagrams = diagramsOf(s);
    const lesson: Lesson = {
      id: `strategy:${name}`,
      kind: 'strategy',
      title: title(s),
      names: [name],
      lesson: inlineHtml(lessonOf(s.body)),
      diagrams,
      doc: docLink(s),
      guide: STRATEGY_GUIDE[name] ?? [],
    };
    group.lessons.push(lesson);
    byName.set(name, { lesson, diagrams });
  }
  // A `##` with no lesson of its own that draws a diagram (the late write under `lock`
  // and `fenced`) lends it to the strategies its heading names.
  for (const s of sections.filter((x) => x.level === 2)) {
    for (const name of namesIn(s.title)) byName.get(name)?.diagrams.push(...diagramsOf(s));
  }
  const missing = known.filter((name) => !byName.has(name));
  const found = groups.filter((g) => g.lessons.length > 0);
  if (missing.length === 0) return found;
  return [
    ...found,
    {
      kind: 'strategy',
      title: 'Not in the docs',
      intro: '',
      lessons: missing.map((name) => ({
        id: `strategy:${name}`,
        kind: 'strategy',
        title: `<code>${name}</code>`,
        names: [name],
        lesson: `No section of docs/strategies.md names <code>${name}</code> yet.`,
        diagrams: [],
        doc: 'docs/strategies.md',
        guide: STRATEGY_GUIDE[name] ?? [],
      })),
    },
  ];
}

/**
 * The fault lessons: each heading of docs/faults.md that names scenarios (`paused-lock`,
 * `lost-reply-*`, `cluster-slot-moved-lock|fenced`) is a lesson running them; a scenario
 * named by several headings belongs to the most specific. Scenarios no heading names
 * (settlement's) go to the section of any docs page that says how to run them
 * (`--only <prefix>`).
 */
export function faultGroups(root: string, scenarios: readonly string[] = SCENARIO_NAMES): LessonGroup[] {
  const sections = read(root, 'docs/faults.md');
  const matched = sections.map((s) => [...new Set(namesIn(s.title).flatMap((n) => expandName(n, scenarios)))]);
  const owner = new Map<string, number>();
  for (const name of scenarios) {
    let best = -1;
    matched.forEach((names, i) => {
      if (!names.includes(name)) return;
      if (best < 0 || names.length < matched[best].length) best = i;
    });
    if (best >= 0) owner.set(name, best);
  }
  const groups: { -readonly [K in keyof LessonGroup]: LessonGroup[K] }[] = [];
  const h1 = sections.find((s) => s.level === 1);
  let group: LessonGroup | undefined;
  sections.forEach((s, i) => {
    const names = scenarios.filter((name) => owner.get(name) === i);
    if (s.level === 2 && (names.length === 0 || sections[i + 1]?.level === 3)) {
      group = { kind: 'fault', title: title(s), intro: inlineHtml(lessonOf(s.body)), lessons: [] };
      groups.push(group);
    } else if (s.level === 2 && (!group || group.title !== (h1 ? title(h1) : 'Faults'))) {
      group = { kind: 'fault', title: h1 ? title(h1) : 'Faults', intro: '', lessons: [] };
      groups.push(group);
    }
    if (names.length > 0) group!.lessons.push(faultLesson(s, names));
  });
  // A lone scenario heading between two groups is a group of its own, under its own title.
  for (const g of groups) if (h1 && g.title === title(h1) && g.lessons.length === 1) g.title = g.lessons[0].title;
  const left = scenarios.filter((name) => !owner.has(name));
  const byPrefix = new Map<string, string[]>();
  for (const name of left) {
    const prefix = name.split('-')[0];
    byPrefix.set(prefix, [...(byPrefix.get(prefix) ?? []), name]);
  }
  for (const [prefix, names] of byPrefix) {
    const s = otherDocs(root).find((x) => x.body.includes(`--only ${prefix}`));
    const lesson = s
      ? faultLesson(s, names)
      : {
          ...faultLesson({ file: 'docs/faults.md', level: 2, title: prefix, line: 1, body: '', slug: '' }, names),
          lesson: `Runs <code>npm run faults -- --only ${prefix}</code>; no docs page describes it yet.`,
        };
    groups.push({ kind: 'fault', title: s ? title(s) : prefix, intro: '', lessons: [lesson] });
  }
  return groups.filter((g) => g.lessons.length > 0);
}

function faultLesson(s: Section, names: string[]): Lesson {
  return {
    id: `fault:${names[0]}`,
    kind: 'fault',
    title: title(s),
    names,
    lesson: inlineHtml(lessonOf(s.body)),
    diagrams: diagramsOf(s),
    doc: docLink(s),
    guide: faultGuide(names),
  };
}

/** The sections of every docs page but faults.md and strategies.md. */
function otherDocs(root: string): Section[] {
  return readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md') && f !== 'faults.md' && f !== 'strategies.md')
    .sort()
    .flatMap((f) => read(root, `docs/${f}`));
}

/** The bucket counts of the shard lessons: one product on one shard, and the same sale on three. */
export const SHARD_LESSON_BUCKETS: readonly number[] = [1, 3];

/**
 * The shard lessons: the section of docs/scaling.md whose text runs
 * `npm run lab:shards -- --buckets N` is the lesson of N buckets, in the group of the
 * page's title. A count no section runs is still listed, under "Not in the docs".
 */
export function shardGroups(root: string): LessonGroup[] {
  const sections = read(root, 'docs/scaling.md');
  const byBuckets = new Map<number, Lesson>();
  for (const s of sections) {
    const buckets = Number(/npm run lab:shards -- --buckets (\d+)\b/.exec(s.body)?.[1]);
    if (!SHARD_LESSON_BUCKETS.includes(buckets) || byBuckets.has(buckets)) continue;
    // A `###` lesson also draws its `##`'s diagrams (a move between buckets, under "several shards").
    const parent = sections.filter((x) => x.line < s.line && x.level < s.level).pop();
    byBuckets.set(buckets, {
      ...shardLesson(buckets, docLink(s)),
      title: title(s),
      lesson: inlineHtml(lessonOf(s.body)),
      diagrams: [...diagramsOf(s), ...(parent && parent.level > 1 ? diagramsOf(parent) : [])],
    });
  }
  const h1 = sections.find((x) => x.level === 1);
  const groups: LessonGroup[] = [
    {
      kind: 'shards',
      title: h1 ? title(h1) : 'Scaling',
      intro: h1 ? inlineHtml(lessonOf(h1.body)) : '',
      lessons: SHARD_LESSON_BUCKETS.flatMap((b) => byBuckets.get(b) ?? []),
    },
    {
      kind: 'shards',
      title: 'Not in the docs',
      intro: '',
      lessons: SHARD_LESSON_BUCKETS.filter((b) => !byBuckets.has(b)).map((b) => ({
        ...shardLesson(b, 'docs/scaling.md'),
        lesson: `No section of docs/scaling.md runs <code>npm run lab:shards -- --buckets ${b}</code> yet.`,
      })),
    },
  ];
  return groups.filter((g) => g.lessons.length > 0);
}

function shardLesson(buckets: number, doc: string): Lesson {
  return {
    id: `shards:${buckets}`,
    kind: 'shards',
    title: `One product on ${buckets === 1 ? 'one shard' : `${buckets} shards`}`,
    names: [`buckets: ${buckets}`],
    buckets,
    lesson: '',
    diagrams: [],
    doc,
    guide: shardGuide(buckets),
  };
}

/** Every lesson: strategies, then the shard lessons, then faults. */
export function catalogue(root: string): LessonGroup[] {
  return [...strategyGroups(root), ...shardGroups(root), ...faultGroups(root)];
}
