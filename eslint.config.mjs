// @ts-check
import eslint from '@eslint/js';
import prettier from 'eslint-config-prettier';
import { defineConfig } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/** Where code may not reach: each folder owns one thing, and dependencies point one way. */
const NOT_TEST_CODE = {
  group: ['**/test', '**/test/**', '**/bench', '**/bench/**', '**/harness', '**/harness/**'],
  message: 'src/ never imports test/, bench/ or harness/: they use the app, not the other way round',
};
const NOT_ORDERS = {
  group: ['**/orders', '**/orders/**'],
  message: 'locks/ knows nothing of orders: a lock runs a callback (see src/locks/lock.ts)',
};
const NOT_FEATURES = {
  group: ['**/locks', '**/locks/**', '**/orders', '**/orders/**', '**/products', '**/products/**'],
  message: 'redis/ is the floor the features stand on: it imports none of them',
};

/**
 * The floors of src/, from the ground up: a folder imports only folders on floors below
 * its own (errors/ and sale/ are leaves). http/ and the files at src/'s root are the app
 * shell, above every floor. Checked for every folder below (floorRules).
 */
const FLOORS = [
  ['errors', 'sale'],
  ['settings'],
  ['telemetry'],
  ['redis', 'validation'],
  ['docs', 'locks'],
  ['door'],
  ['orders'],
  ['settlement'],
  ['products', 'health', 'dashboard'],
  ['config'],
];
const SHELL = [
  'http',
  'app.module',
  'create-app',
  'main',
  'settle',
  'open-requests',
  'trusted-proxy',
  'listen-address',
];

/** The lessons some floors keep, said before the floor's own rule. */
const LESSONS = { locks: [NOT_ORDERS], redis: [NOT_FEATURES] };

/** One boundary per folder: no folder on its own floor or above, nor the shell. */
function floorRules() {
  return FLOORS.flatMap((floor, level) =>
    floor.map((folder) => {
      const above = [
        ...FLOORS.slice(level)
          .flat()
          .filter((f) => f !== folder),
        ...SHELL,
      ];
      return boundary(
        [`src/${folder}/**/*.ts`],
        ['src/**/*.spec.ts'],
        [
          NOT_TEST_CODE,
          ...(LESSONS[folder] ?? []),
          {
            group: above.flatMap((f) => [`**/${f}`, `**/${f}/**`]),
            message: `src/${folder}/ stands on floor ${level + 1} of src/ (eslint.config.mjs FLOORS): it imports only the floors below it`,
          },
        ],
      );
    }),
  );
}

// The folder a NOT_ group's glob names, as a regular expression on an import path
// (a slash written \x2F: a selector's regular expression ends at the first slash).
function folderOf(glob) {
  return glob.replace(/^\*\*\//, '').replace(/\/\*\*$/, '');
}

/**
 * The boundaries for one set of files, enforced on every way in: `import`, `import type`,
 * `export ... from`, `import x = require()` (the typescript-eslint rule), and `import()` and `require()`
 * calls, with a string or a plain template literal, and `import('…')` types
 * (no-restricted-syntax), so a dynamic import is no way round them.
 */
function boundary(files, ignores, rules) {
  const calls = rules.flatMap((rule) =>
    [...new Set(rule.group.map(folderOf))].map((folder) => {
      const re = `(^|\\x2F)${folder}(\\x2F|$)`;
      return [
        { selector: `ImportExpression[source.value=/${re}/]`, message: rule.message },
        // import(`../orders/x`): a template literal with nothing interpolated.
        { selector: `ImportExpression > TemplateLiteral > TemplateElement[value.raw=/${re}/]`, message: rule.message },
        { selector: `CallExpression[callee.name='require'][arguments.0.value=/${re}/]`, message: rule.message },
        {
          selector: `CallExpression[callee.name='require'] > TemplateLiteral > TemplateElement[value.raw=/${re}/]`,
          message: rule.message,
        },
        // typeof import('../orders/x'), import('../orders/x').T in a type.
        { selector: `TSImportType[source.value=/${re}/]`, message: rule.message },
      ];
    }),
  );
  return {
    files,
    ignores,
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', { patterns: rules }],
      'no-restricted-syntax': ['error', ...calls.flat()],
    },
  };
}

export default defineConfig(
  { ignores: ['dist/', 'node_modules/', 'coverage/', 'bench/results/', '.data/'] },
  eslint.configs.recommended,
  tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // A promise nobody awaits loses its error and its timing: say `void` when that is meant.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // Test helpers and replies from Redis are loosely typed on purpose in a few places.
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: globals.node, sourceType: 'commonjs' },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  { files: ['**/*.mjs'], languageOptions: { sourceType: 'module' } },
  // The dashboard's page and the lab's run in the browser as plain scripts, beside Chart.js's global.
  {
    files: ['src/dashboard/public/**/*.js', 'bench/lab/public/**/*.js'],
    languageOptions: { globals: { ...globals.browser, Chart: 'readonly' }, sourceType: 'script' },
  },
  boundary(['src/**/*.ts'], ['src/**/*.spec.ts'], [NOT_TEST_CODE]),
  ...floorRules(),
  boundary(['src/locks/**/*.spec.ts'], [], [NOT_ORDERS]),
  prettier,
);
