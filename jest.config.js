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
    // content-disposition 3 (a dependency of @fastify/static, which serves Swagger UI's
    // assets) ships only as an ES module, which Jest 29 cannot require; Node itself can.
    '/node_modules/content-disposition/.+\\.js$': ['ts-jest', { tsconfig: 'tsconfig.json' }],
  },
  transformIgnorePatterns: ['/node_modules/(?!content-disposition/)'],
  // Each file starts its own redis-server processes; two workers match two cores.
  maxWorkers: 2,
  testTimeout: 30_000,
};
