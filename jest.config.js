/**
 * Two projects: every test over the embedded SQLite store, and the HTTP behaviour suite again over
 * PostgreSQL when PLANT_STORE_TEST_DATABASE_URL names a database (CI always sets it).
 * @type {import('jest').Config}
 */
const base = {
  testEnvironment: 'node',
  rootDir: __dirname,
  roots: ['<rootDir>/test'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
};

const withPostgres = process.env.PLANT_STORE_TEST_DATABASE_URL !== undefined;

module.exports = {
  testTimeout: 30000,
  globalSetup: '<rootDir>/test/support/global-setup.js',
  projects: [
    { ...base, displayName: 'sqlite', testMatch: ['**/*.test.ts'] },
    ...(withPostgres
      ? [
          {
            ...base,
            displayName: 'postgres-http',
            testMatch: ['<rootDir>/test/http/**/*.test.ts'],
            // Pure parser tests: nothing about them depends on the store.
            testPathIgnorePatterns: ['/lossless-json\\.test\\.ts$', '/int64\\.test\\.ts$'],
            setupFiles: ['<rootDir>/test/support/use-postgres-store.js'],
          },
        ]
      : []),
  ],
};
