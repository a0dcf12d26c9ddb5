/**
 * The lab's page, rendered on the server from the lessons (so a page read without
 * JavaScript, or dumped by a headless browser, already names every lesson), with the
 * knobs and Run buttons that public/lab.js wires to the API.
 */
import type { Lesson, LessonGroup } from './lessons';

const esc = (text: string) =>
  text.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);

/** The knobs' defaults and bounds: small enough that a run takes seconds on a laptop. */
export const KNOBS = {
  buyers: { min: 1, max: 20_000, value: 2_000 },
  stock: { min: 1, max: 10_000, value: 200 },
  connections: { min: 1, max: 1_000, value: 50 },
} as const;

function number(name: keyof typeof KNOBS, value: number = KNOBS[name].value): string {
  const k = KNOBS[name];
  return `<label>${name} <input type="number" name="${name}" min="${k.min}" max="${k.max}" value="${value}"></label>`;
}

function knobs(lesson: Lesson): string {
  const sale = `${number('buyers')}${number('stock')}${number('connections')}`;
  if (lesson.kind === 'strategy') {
    return `<input type="hidden" name="strategy" value="${esc(lesson.names[0])}">${sale}`;
  }
  if (lesson.kind === 'shards') {
    // Every request buys, as docs/scaling.md measures a shard's ceiling: the work per shard is the sales'.
    const contended = `${number('buyers')}${number('stock', KNOBS.buyers.value)}${number('connections')}`;
    return `<input type="hidden" name="buckets" value="${lesson.buckets}">${contended}`;
  }
  const variants = lesson.names.map((n) => `<option value="${esc(n)}">${esc(n)}</option>`).join('');
  return (
    (lesson.names.length > 1
      ? `<label>scenario <select name="scenario">${variants}</select></label>`
      : `<input type="hidden" name="scenario" value="${esc(lesson.names[0])}">`) +
    `<label>size <select name="size"><option value="quick">quick (what npm test runs)</option><option value="full">full</option></select></label>`
  );
}

function lessonHtml(lesson: Lesson): string {
  const diagrams = lesson.diagrams.map((d) => `<pre class="mermaid">${esc(d)}</pre>`).join('');
  const guide = lesson.guide
    .map(
      (g) =>
        `<li><a href="/source/${esc(g.path)}" target="_blank"><code>${esc(g.path)}</code></a> — ${esc(g.why)}</li>`,
    )
    .join('');
  return `<article class="lesson" id="${esc(lesson.id.replace(':', '-'))}" data-lesson="${esc(lesson.id)}" data-kind="${lesson.kind}">
  <h3>${lesson.title}</h3>
  <p class="names">${lesson.names.map((n) => `<code class="name">${esc(n)}</code>`).join(' ')}</p>
  <p class="text">${lesson.lesson}</p>
  ${diagrams ? `<div class="diagrams">${diagrams}</div>` : ''}
  ${guide ? `<details class="guide"><summary>Reading guide</summary><ol>${guide}</ol></details>` : ''}
  <form class="run" data-kind="${lesson.kind}">${knobs(lesson)}
    <button type="submit" name="lane" value="left">Run ◂ left</button>
    <button type="submit" name="lane" value="right">Run ▸ right</button>
    <a class="doc" href="/source/${esc(lesson.doc)}" target="_blank">${esc(lesson.doc.split('#')[0])}</a>
  </form>
</article>`;
}

function groupHtml(group: LessonGroup): string {
  return `<section class="group" data-kind="${group.kind}">
  <h2>${group.title}</h2>
  ${group.intro ? `<p class="intro">${group.intro}</p>` : ''}
  ${group.lessons.map(lessonHtml).join('\n')}
</section>`;
}

function lane(side: 'left' | 'right'): string {
  return `<div class="lane" id="lane-${side}" data-lane="${side}">
  <h3>${side}: <span class="title">nothing yet: press a Run button</span></h3>
  <p class="command"></p>
  <p class="state"></p>
  <p class="actions"><button class="stop" hidden>Stop</button> <button class="rerun" hidden>Run again</button> <a class="report" hidden target="_blank">HTML report</a></p>
  <table class="codes"></table>
  <ol class="timeline"></ol>
  <div class="verdict"></div>
</div>`;
}

export function renderPage(groups: readonly LessonGroup[]): string {
  const strategies = groups.filter((g) => g.kind === 'strategy');
  const shards = groups.filter((g) => g.kind === 'shards');
  const faults = groups.filter((g) => g.kind === 'fault');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>seckill lab</title>
<link rel="icon" type="image/svg+xml" href="/favicon.ico">
<link rel="stylesheet" href="/lab.css">
</head>
<body>
<header>
  <h1>seckill lab</h1>
  <p>Every lesson of the docs, run for real: the bench's buyers against fresh app processes on a private Redis (or, for one product across shards, a private Redis Cluster of three masters), or a scenario of the fault suite, with the verdict read from Redis. One experiment at a time; the next waits in line.</p>
</header>
<section id="compare">
  <h2>Side by side</h2>
  <div class="chart-box"><canvas id="chart"></canvas></div>
  <div class="lanes">${lane('left')}${lane('right')}</div>
</section>
<section id="runs"><h2>Runs this session</h2><table><thead><tr><th>#</th><th>lesson</th><th>state</th><th>verdict</th><th></th></tr></thead><tbody></tbody></table></section>
<nav id="toc"><h2>Lessons</h2><ul>${groups.map((g) => `<li>${g.title}: ${g.lessons.map((l) => `<a href="#${esc(l.id.replace(':', '-'))}">${l.names.length > 1 ? l.title : esc(l.names[0])}</a>`).join(', ')}</li>`).join('')}</ul></nav>
<main>
<h2 class="part">Strategies</h2>
${strategies.map(groupHtml).join('\n')}
<h2 class="part">Shards</h2>
${shards.map(groupHtml).join('\n')}
<h2 class="part">Faults</h2>
${faults.map(groupHtml).join('\n')}
</main>
<script src="/vendor/chart.js"></script>
<script src="/vendor/mermaid.js"></script>
<script src="/lab.js"></script>
</body>
</html>
`;
}
