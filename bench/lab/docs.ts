/**
 * What the lab reads from the docs at run time (docs/*.md), so its lessons say what the
 * docs say: the sections under each heading, their first paragraph, and their Mermaid
 * diagrams. test/diagrams.e2e-spec.ts checks the same diagrams render.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Diagram {
  /** `file:line` of the opening fence, for a message a reader can follow. */
  readonly where: string;
  readonly file: string;
  readonly text: string;
}

/** The ```mermaid blocks of one Markdown text, in order; `file` names it in `where`. */
export function mermaidIn(file: string, markdown: string, firstLine = 1): Diagram[] {
  const lines = markdown.split('\n');
  const found: Diagram[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() !== '```mermaid') continue;
    const end = lines.findIndex((line, j) => j > i && line.trim() === '```');
    if (end < 0) throw new Error(`${file}:${i + firstLine}: a mermaid block that never closes`);
    found.push({ where: `${file}:${i + firstLine}`, file, text: lines.slice(i + 1, end).join('\n') });
    i = end;
  }
  return found;
}

/** Every ```mermaid block of README.md and docs/*.md under `root`, in file order. */
export function mermaidBlocks(root: string): Diagram[] {
  const files = [
    'README.md',
    ...readdirSync(join(root, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .sort()
      .map((f) => `docs/${f}`),
  ];
  return files.flatMap((file) => mermaidIn(file, readFileSync(join(root, file), 'utf8')));
}

export interface Section {
  readonly file: string;
  /** 1 for `#`, 2 for `##`, ... */
  readonly level: number;
  readonly title: string;
  /** The heading's line, 1-based. */
  readonly line: number;
  /** The lines under the heading, up to the next heading of any level. */
  readonly body: string;
  /** GitHub's anchor for the heading. */
  readonly slug: string;
}

/** The headed sections of a Markdown file (headings inside code fences are not headings). */
export function sectionsOf(file: string, markdown: string): Section[] {
  const lines = markdown.split('\n');
  const heads: { level: number; title: string; at: number }[] = [];
  let fenced = false;
  lines.forEach((line, at) => {
    if (/^\s*```/.test(line)) fenced = !fenced;
    const m = !fenced && /^(#{1,6})\s+(.*\S)\s*$/.exec(line);
    if (m) heads.push({ level: m[1].length, title: m[2], at });
  });
  return heads.map((h, i) => ({
    file,
    level: h.level,
    title: h.title,
    line: h.at + 1,
    body: lines.slice(h.at + 1, heads[i + 1]?.at ?? lines.length).join('\n'),
    slug: slug(h.title),
  }));
}

/** GitHub's heading anchor: lower case, punctuation dropped, spaces to dashes. */
export function slug(title: string): string {
  return title
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The text blocks of a section body: paragraphs and list items, code fences and tables left out. */
export function blocksOf(body: string): { kind: 'paragraph' | 'item'; text: string }[] {
  const blocks: { kind: 'paragraph' | 'item'; text: string }[] = [];
  let fenced = false;
  let current: { kind: 'paragraph' | 'item'; text: string } | null = null;
  for (const line of body.split('\n')) {
    if (/^\s*```/.test(line)) {
      fenced = !fenced;
      current = null;
      continue;
    }
    if (fenced || /^\s*\|/.test(line) || line.trim() === '') {
      current = null;
      continue;
    }
    const item = /^- (.*)$/.exec(line);
    if (item) {
      current = { kind: 'item', text: item[1].trim() };
      blocks.push(current);
    } else if (current) {
      current.text += ` ${line.trim()}`;
    } else {
      current = { kind: 'paragraph', text: line.trim() };
      blocks.push(current);
    }
  }
  return blocks;
}

/**
 * A section's lesson in one paragraph: the list items that say what it keeps and how it
 * fails (a strategy's Guarantees / Does not guarantee / Failure), else its first
 * paragraph of prose, else its first item.
 */
export function lessonOf(body: string): string {
  const blocks = blocksOf(body);
  const telling = blocks.filter((b) => b.kind === 'item' && /^(Guarantees|Does not guarantee|Failure):/.test(b.text));
  if (telling.length > 0) return telling.map((b) => b.text).join(' ');
  return (blocks.find((b) => b.kind === 'paragraph') ?? blocks[0])?.text ?? '';
}

/** Backticked names in a heading: `paused-lock`, `lost-reply-*`, `cluster-slot-moved-lock|fenced`. */
export function namesIn(title: string): string[] {
  return [...title.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
}

/** The scenarios of `known` a heading's name stands for: itself, `x-*` for every `x-...`, `x-a|b` for x-a and x-b. */
export function expandName(name: string, known: readonly string[]): string[] {
  if (name.endsWith('-*')) return known.filter((k) => k.startsWith(name.slice(0, -1)));
  const bar = /^(.*-)([^-]*\|.*)$/.exec(name);
  if (bar)
    return bar[2]
      .split('|')
      .map((v) => bar[1] + v)
      .filter((v) => known.includes(v));
  return known.includes(name) ? [name] : [];
}

/** Inline Markdown as HTML: escaped, with `code`, **bold**, *emphasis* and [links](to) kept as text. */
export function inlineHtml(text: string): string {
  const escaped = text.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
  return escaped
    .split(/(`[^`]*`)/)
    .map((part) =>
      part.startsWith('`') && part.endsWith('`') && part.length > 1
        ? `<code>${part.slice(1, -1)}</code>`
        : part
            .replace(/\*\*([^*]+)\*\*/g, '<b>$1</b>')
            .replace(/\*([^*]+)\*/g, '<i>$1</i>')
            .replace(/\[([^\]]+)\]\([^)]+\)/g, '$1'),
    )
    .join('');
}
