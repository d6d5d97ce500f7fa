// Runs the HTTP behaviour suite over PostgreSQL (see jest.config.js and test/support/test-app.ts).
process.env.PLANT_STORE_TEST_STORE = 'postgres';
