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
 * The error table's sections register their codes as they load, in the order errors.ts
 * loads them: every other folder imports the table from errors/errors.ts.
 */
const NOT_ERROR_SECTIONS = {
  group: ['**/errors/app-error', '**/errors/*-errors'],
  message: "import the error table from src/errors/errors.ts, which loads its sections in the table's order",
};

/**
 * The floors of src/, from the ground up: a folder imports only folders on floors below
 * its own (errors/ and types/ are leaves). http/ and the files at src/'s root are the app
 * shell, above every floor. Checked for every folder below (floorRules); spec files
 * may reach across floors to set up what they test.
 */
const FLOORS = [
  ['errors', 'types'],
  ['sale'],
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

/** A folder of src/ reached by a relative path, from as deep as src/ nests: never a package named alike. */
function relative(folder) {
  return ['../', '../../', '../../../'].flatMap((up) => [`${up}${folder}`, `${up}${folder}/**`]);
}

/** What every file of src/ keeps, whatever its floor. */
function common(folder) {
  return folder === 'errors' ? [NOT_TEST_CODE] : [NOT_TEST_CODE, NOT_ERROR_SECTIONS];
}

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
          ...common(folder),
          ...(LESSONS[folder] ?? []),
          {
            group: above.flatMap(relative),
            message: `src/${folder}/ stands on floor ${level + 1} of src/ (eslint.config.mjs FLOORS): it imports only the floors below it`,
          },
        ],
      );
    }),
  );
}

// The path a group's glob names, as a regular expression on an import path (a slash
// written \x2F: a selector's regular expression ends at the first slash). A relative
// glob ('../orders') matches only relative paths to that folder; a '**/' one, any.
function pathOf(glob) {
  const rest = glob
    .replace(/^(\*\*\/|(\.\.\/)+)/, '')
    .replace(/\/\*\*$/, '')
    .replace(/\*/g, '[^\\x2F]*')
    .replace(/\//g, '\\x2F');
  const start = glob.startsWith('..') ? '^(\\.\\.\\x2F)+' : '(^|\\x2F)';
  return `${start}${rest}(\\x2F|$)`;
}

/** Ways round the floors that no path can be checked on: refused in src/ (not in its specs). */
const UNCHECKABLE = [
  {
    selector: "CallExpression[callee.object.name='require'][callee.property.name='resolve'][arguments.0.value=/^\\./]",
    message: 'require.resolve() of a file of the project hides an import from the floors: import it',
  },
  {
    selector: "CallExpression[callee.name='createRequire']",
    message: 'createRequire() hides imports from the floors: import the module',
  },
  {
    selector: "ImportExpression[source.type!='Literal'][source.type!='TemplateLiteral']",
    message: 'import() of a computed path hides an import from the floors: name the module',
  },
  {
    selector: 'ImportExpression > TemplateLiteral[expressions.length>0]',
    message: 'import() of a computed path hides an import from the floors: name the module',
  },
];

/**
 * The boundaries for one set of files, enforced on every way in: `import`, `import type`,
 * `export ... from`, `import x = require()` (the typescript-eslint rule), and `import()` and `require()`
 * calls, with a string or a plain template literal, and `import('…')` types
 * (no-restricted-syntax), so a dynamic import is no way round them.
 */
function boundary(files, ignores, rules) {
  const calls = rules.flatMap((rule) =>
    [...new Set(rule.group.map(pathOf))].map((re) => {
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
      'no-restricted-syntax': ['error', ...calls.flat(), ...(ignores.length > 0 ? UNCHECKABLE : [])],
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
  boundary(['src/**/*.ts'], ['src/**/*.spec.ts'], [NOT_TEST_CODE, NOT_ERROR_SECTIONS]),
  ...floorRules(),
  boundary(['src/locks/**/*.spec.ts'], [], [NOT_ORDERS]),
  prettier,
);
