import { StoreUnavailableError } from '../../src/store/plant-store';
import {
  openPostgresPlantStore,
  type PostgresStoreOptions,
} from '../../src/store/postgres/postgres-plant-store';
import { createTestDatabase, withClient, type TestDatabase } from '../support/postgres-database';
import { describeWithPgBouncer, startPgBouncer, type PgBouncer } from '../support/pgbouncer';
import { describePlantStoreContract } from './plant-store.contract';

/** The database's own statement_timeout: the one the store gets through PgBouncer. */
const DATABASE_STATEMENT_TIMEOUT_MS = 1500;

describeWithPgBouncer('PostgreSQL store through PgBouncer', () => {
  let database: TestDatabase;
  let bouncer: PgBouncer;
  beforeAll(async () => {
    database = await createTestDatabase('pgbouncer');
    await database.admin(
      `ALTER DATABASE ${database.name} SET statement_timeout = ${DATABASE_STATEMENT_TIMEOUT_MS}`,
    );
    bouncer = await startPgBouncer(database.name);
    console.log(`PgBouncer ${bouncer.version} in ${bouncer.poolMode} mode`);
  });
  afterAll(async () => {
    // First: PgBouncer keeps server connections to the database, which would fail the drop.
    await bouncer?.stop();
    await database?.drop();
  });

  /** Through PgBouncer, leaving the statement time-out to the database. */
  const options = (): PostgresStoreOptions => ({
    ...database.options,
    url: bouncer.url,
    statementTimeoutMs: 0,
  });

  it('refuses to open with a statement time-out of its own, which PgBouncer refuses, saying what to set', async () => {
    const refusal = await openPostgresPlantStore({ ...options(), statementTimeoutMs: 5000 }).then(
      async (store) => void (await store.close()),
      (error: unknown) => error,
    );
    expect(refusal).toBeInstanceOf(Error);
    expect((refusal as Error).message).toBe(
      'The connection refused the statement time-out (unsupported startup parameter: ' +
        'statement_timeout), as PgBouncer does: set PG_STATEMENT_TIMEOUT_MS=0, and a ' +
        "statement_timeout for the role or database (ALTER ROLE plants SET statement_timeout = '5s'), " +
        'which the server then applies.',
    );
  });

  it("with statementTimeoutMs 0, has a statement cancelled after the database's statement_timeout, as unavailable", async () => {
    // A connect time-out below the database's statement time-out: the store's own bound on a
    // query must not end it first.
    const store = await openPostgresPlantStore({ ...options(), connectTimeoutMs: 500 });
    try {
      await withClient(database.url, async (locker) => {
        await locker.query('BEGIN');
        await locker.query('LOCK TABLE plants IN ACCESS EXCLUSIVE MODE');
        const started = performance.now();
        const outcome = await store.createPlant({ id: 1n, name: 'p' }).then(
          () => 'stored',
          (error: unknown) => error,
        );
        const ms = performance.now() - started;
        await locker.query('ROLLBACK');
        expect(outcome).toBeInstanceOf(StoreUnavailableError);
        expect(((outcome as Error).cause as { code?: unknown }).code).toBe('57014');
        expect(ms).toBeGreaterThanOrEqual(DATABASE_STATEMENT_TIMEOUT_MS - 50);
        expect(ms).toBeLessThan(DATABASE_STATEMENT_TIMEOUT_MS + 500);
      });
      expect(await store.createPlant({ id: 1n, name: 'p' })).toEqual({ name: 'p' });
    } finally {
      await store.close();
      await withClient(database.url, (client) => client.query('TRUNCATE plants, tokens'));
    }
  });

  describePlantStoreContract('PostgreSQL through PgBouncer', async () => {
    const store = await openPostgresPlantStore(options());
    return {
      store,
      readPlants: () =>
        withClient(database.url, async (client) => {
          const { rows } = await client.query<{ id: string; name: string; tag: string | null }>(
            'SELECT id::text AS id, name, tag FROM plants ORDER BY plants.id',
          );
          return rows.map((row) => ({ ...row, id: BigInt(row.id) }));
        }),
      async cleanup() {
        await store.close();
        await withClient(database.url, (client) => client.query('TRUNCATE plants, tokens'));
      },
    };
  });
});
