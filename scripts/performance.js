'use strict';
/**
 * `npm run perf`: install and build if needed, then regenerate the generated
 * part of docs/performance.md from real bench runs (bench/performance.ts).
 */
const { launch, runBuilt } = require('./launch');

launch({}, () => runBuilt('bench/performance.js'));
