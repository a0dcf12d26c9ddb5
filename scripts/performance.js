'use strict';
/**
 * `npm run perf`: install and build if needed, then regenerate README.md's
 * Performance section from real bench runs (bench/performance.ts).
 */
const path = require('node:path');
const { ROOT, ensureDependencies, ensureBuilt } = require('./setup');

ensureDependencies();
ensureBuilt();
require(path.join(ROOT, 'dist', 'bench', 'performance.js')).cli();
