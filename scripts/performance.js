'use strict';
/**
 * `npm run perf`: install and build if needed, then regenerate README.md's
 * Performance section from real bench runs (bench/performance.ts).
 */
const path = require('node:path');
const { ROOT, ensureDependencies, ensureBuilt } = require('./setup');

ensureDependencies();
ensureBuilt('app');
ensureBuilt('bench');
require(path.join(ROOT, 'bench', 'dist', 'bench', 'performance.js')).cli();
