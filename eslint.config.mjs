// @ts-check
import eslint from '@eslint/js';
import prettier from 'eslint-config-prettier';
import { defineConfig } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/** Where code may not reach: each folder owns one thing, and dependencies point one way. */
const NOT_TEST_CODE = {
  group: ['**/test/**', '**/bench/**', '**/harness/**'],
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
  {
    files: ['src/**/*.ts'],
    ignores: ['src/**/*.spec.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [NOT_TEST_CODE] }] },
  },
  {
    files: ['src/locks/**/*.ts'],
    ignores: ['src/**/*.spec.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [NOT_TEST_CODE, NOT_ORDERS] }] },
  },
  { files: ['src/locks/**/*.spec.ts'], rules: { 'no-restricted-imports': ['error', { patterns: [NOT_ORDERS] }] } },
  {
    files: ['src/redis/**/*.ts'],
    ignores: ['src/**/*.spec.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [NOT_TEST_CODE, NOT_FEATURES] }] },
  },
  prettier,
);
