import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { PostgresStoreOptions } from '../../src/store/postgres/postgres-plant-store';

/** The database the PostgreSQL tests use; without it they are skipped (never in CI). */
export const TEST_DATABASE_URL = process.env['PLANT_STORE_TEST_DATABASE_URL'];

if (TEST_DATABASE_URL === undefined && process.env['CI'] === 'true') {
  throw new Error('CI must run the PostgreSQL tests: set PLANT_STORE_TEST_DATABASE_URL.');
}

/** The port of the test database's server: the URL's, or PostgreSQL's default. */
export function testDatabasePort(): number {
  if (TEST_DATABASE_URL === undefined) throw new Error('PLANT_STORE_TEST_DATABASE_URL is not set');
  return Number(new URL(TEST_DATABASE_URL).port || 5432);
}

/** `describe`, or `describe.skip` when no test database is configured. */
export const describeWithPostgres = TEST_DATABASE_URL === undefined ? describe.skip : describe;

export interface TestSchema {
  /** A URL whose connections use the schema (search_path), so each test has its own tables. */
  readonly url: string;
  readonly options: PostgresStoreOptions;
  drop(): Promise<void>;
}

/** Creates an empty schema in the test database; `drop` removes it with everything in it. */
export async function createTestSchema(): Promise<TestSchema> {
  if (TEST_DATABASE_URL === undefined) throw new Error('PLANT_STORE_TEST_DATABASE_URL is not set');
  const schema = `plant_store_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE SCHEMA ${schema}`);
  } finally {
    await admin.end();
  }
  const url = new URL(TEST_DATABASE_URL);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return {
    url: url.toString(),
    options: { url: url.toString(), poolSize: 5, connectTimeoutMs: 2000, statementTimeoutMs: 5000 },
    async drop() {
      const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await client.connect();
      try {
        await client.query(`DROP SCHEMA ${schema} CASCADE`);
      } finally {
        await client.end();
      }
    },
  };
}
