import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { PostgresStoreOptions } from '../../src/store/postgres/postgres-plant-store';
import { TEST_DATABASE_URL } from './postgres';

/** Runs `use` on a connection of its own to `url`, and closes it. */
export async function withClient<T>(
  url: string,
  use: (client: pg.Client) => Promise<T>,
): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

export interface TestDatabase {
  /** Its name: `plant_store_test_`, the prefix and random hex, safe in SQL unquoted. */
  readonly name: string;
  /** The test database's URL with this database's name instead. */
  readonly url: string;
  readonly options: PostgresStoreOptions;
  /** Runs SQL as the test user on a connection to the test database (not to this one). */
  admin(sql: string): Promise<void>;
  /**
   * Ends every connection to this database, as a restart or a failover would, and resolves once
   * they are gone, and their clients have had the time to see it.
   */
  terminateConnections(): Promise<void>;
  /** Drops it, without FORCE: a connection left open fails the drop (and the test). */
  drop(): Promise<void>;
}

/**
 * Creates a database of its own for a test that changes what a schema cannot hold: its encoding,
 * its settings (`ALTER DATABASE ... SET`), or its connections. The test user needs CREATEDB.
 */
export async function createTestDatabase(prefix: string, clauses = ''): Promise<TestDatabase> {
  if (TEST_DATABASE_URL === undefined) throw new Error('PLANT_STORE_TEST_DATABASE_URL is not set');
  const adminUrl = TEST_DATABASE_URL;
  const name = `plant_store_test_${prefix}_${randomBytes(6).toString('hex')}`;
  const admin = (sql: string) =>
    withClient(adminUrl, async (client) => void (await client.query(sql)));
  await admin(`CREATE DATABASE ${name} ${clauses}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    options: { url: url.toString(), poolSize: 5, connectTimeoutMs: 2000, statementTimeoutMs: 5000 },
    admin,
    terminateConnections: () =>
      withClient(adminUrl, async (client) => {
        const others = `FROM pg_stat_activity WHERE datname = '${name}' AND pid <> pg_backend_pid()`;
        await client.query(`SELECT pg_terminate_backend(pid) ${others}`);
        for (;;) {
          const { rows } = await client.query<{ n: number }>(`SELECT COUNT(*)::int AS n ${others}`);
          if (rows[0]?.n === 0) break;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        // Each client reads the server's goodbye (and its socket's end) a moment later.
        await new Promise((resolve) => setTimeout(resolve, 100));
      }),
    drop: () => admin(`DROP DATABASE ${name}`),
  };
}
