// Says clearly, once per run, whether the PostgreSQL tests run, and fails CI when they would not.
module.exports = async () => {
  if (process.env.PLANT_STORE_TEST_DATABASE_URL !== undefined) return;
  if (process.env.CI === 'true') {
    throw new Error('CI must run the PostgreSQL tests: set PLANT_STORE_TEST_DATABASE_URL.');
  }
  process.stderr.write(
    '\nPostgreSQL tests SKIPPED: set PLANT_STORE_TEST_DATABASE_URL to run them, for example\n' +
      '  PLANT_STORE_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npm test\n' +
      '(any database the user may create schemas in, as a user who may create databases; each test\n' +
      'uses a schema of its own, or a database of its own, and drops it).\n\n',
  );
};
