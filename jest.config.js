/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/src', '<rootDir>/test', '<rootDir>/bench', '<rootDir>/harness'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
  modulePathIgnorePatterns: ['<rootDir>/dist/'],
  testRegex: '.*\\.(spec|e2e-spec)\\.ts$',
  moduleFileExtensions: ['ts', 'js', 'json'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }],
  },
  // Each file starts its own redis-server processes; two workers match two cores
  // (`npm test` with no files runs more where files mostly wait: scripts/test.js).
  maxWorkers: 2,
  // Notes each file's wall time for `npm test`'s slowest-files list (scripts/test.js).
  reporters: ['default', '<rootDir>/scripts/test-timings.js'],
  testTimeout: 30_000,
};
