import { randomBytes } from 'node:crypto';
import pg from 'pg';
import {
  createPostgresPlantStore,
  openPostgresPlantStore,
} from '../../src/store/postgres/postgres-plant-store';
import { postgresMigrations } from '../../src/store/postgres/migrations';
import type { PlantStore } from '../../src/store/plant-store';
import { createTestSchema, describeWithPostgres, type TestSchema } from '../support/postgres';
import { withClient } from '../support/postgres-database';
import { readPostgresPlants } from '../support/stored-plants';
import { describePlantStoreContract } from './plant-store.contract';

describeWithPostgres('PostgreSQL store', () => {
  describePlantStoreContract('PostgreSQL', async () => {
    const schema = await createTestSchema();
    const store = await openPostgresPlantStore(schema.options);
    return {
      store,
      readPlants: () => readPostgresPlants(schema.url),
      async cleanup() {
        await store.close();
        await schema.drop();
      },
    };
  });

  describe('openPostgresPlantStore', () => {
    let schema: TestSchema;
    beforeEach(async () => {
      schema = await createTestSchema();
    });
    afterEach(async () => {
      await schema.drop();
    });

    async function schemaVersions(): Promise<number[]> {
      const { rows } = await withClient(schema.url, (client) =>
        client.query<{ version: number }>('SELECT version FROM schema_version ORDER BY version'),
      );
      return rows.map((row) => row.version);
    }

    it('applies every migration once when eight instances start at the same moment', async () => {
      const stores = await Promise.all(
        Array.from({ length: 8 }, () => openPostgresPlantStore(schema.options)),
      );
      expect(await schemaVersions()).toEqual(postgresMigrations.map((_, i) => i + 1));
      await Promise.all(stores.map((store) => store.close()));
    });

    it('keeps data and applies nothing again when reopened', async () => {
      const first = await openPostgresPlantStore(schema.options);
      await first.createPlant({ id: 9223372036854775807n, name: 'kept' });
      await first.close();
      const second = await openPostgresPlantStore(schema.options);
      expect(await second.createPlant({ id: 9223372036854775807n, name: 'again' })).toBeUndefined();
      expect(await schemaVersions()).toEqual(postgresMigrations.map((_, i) => i + 1));
      await second.close();
    });

    it('stores ids as bigint, exactly', async () => {
      const store = await openPostgresPlantStore(schema.options);
      await store.createPlant({ id: 9007199254740993n, name: 'a' });
      await store.createPlant({ id: -9223372036854775808n, name: 'b' });
      const { rows } = await withClient(schema.url, (client) =>
        client.query<{ id: string; type: string }>(
          'SELECT id::text AS id, pg_typeof(id)::text AS type FROM plants ORDER BY id',
        ),
      );
      expect(rows).toEqual([
        { id: '-9223372036854775808', type: 'bigint' },
        { id: '9007199254740993', type: 'bigint' },
      ]);
      await store.close();
    });

    /** The schema's URL, its session's statement_timeout set as a role's or database's would be. */
    function withServerStatementTimeout(setting: string): string {
      const url = new URL(schema.url);
      url.searchParams.set(
        'options',
        `${url.searchParams.get('options')} -c statement_timeout=${setting}`,
      );
      return url.toString();
    }

    it('with statementTimeoutMs 0, opens and stores when the server sets a statement_timeout', async () => {
      const url = withServerStatementTimeout('300');
      const store = await openPostgresPlantStore({ ...schema.options, url, statementTimeoutMs: 0 });
      expect(await store.createPlant({ id: 1n, name: 'p' })).toEqual({ name: 'p' });
      await store.close();
    });

    it('with statementTimeoutMs 0, refuses to open when the server sets no statement_timeout, saying what to set', async () => {
      const url = withServerStatementTimeout('0');
      await expect(
        openPostgresPlantStore({ ...schema.options, url, statementTimeoutMs: 0 }),
      ).rejects.toThrow(
        'PG_STATEMENT_TIMEOUT_MS=0 leaves the statement time-out to the PostgreSQL server, but it ' +
          'sets none for this role and database; set one, for example ALTER ROLE plants SET ' +
          "statement_timeout = '5s', or set PG_STATEMENT_TIMEOUT_MS.",
      );
    });

    it('refuses to open when the server cannot be reached', async () => {
      const store = await openPostgresPlantStore(schema.options);
      await store.close();
      const closedPort = new URL(schema.url);
      closedPort.port = '1';
      const unreachable = openPostgresPlantStore({ ...schema.options, url: closedPort.toString() });
      await expect(unreachable).rejects.toThrow();
    });
  });

  describe('batching', () => {
    let schema: TestSchema;
    let pool: pg.Pool;
    let statements: string[];
    let applicationName: string;
    let store: PlantStore;
    beforeEach(async () => {
      schema = await createTestSchema();
      await (await openPostgresPlantStore(schema.options)).close();
      // Its own application_name, so that a test can find this pool's connections on the server.
      applicationName = `plant-store-batching-${randomBytes(6).toString('hex')}`;
      pool = new pg.Pool({
        connectionString: schema.url,
        max: 5,
        application_name: applicationName,
      });
      pool.on('error', () => undefined);
      // Through to the real pool: only the names of the statements sent are noted.
      statements = [];
      const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
      jest.spyOn(pool, 'query').mockImplementation(((config: unknown, ...rest: unknown[]) => {
        statements.push((config as { name?: string }).name ?? String(config));
        return query(config, ...rest);
      }) as never);
      store = createPostgresPlantStore(pool);
    });
    afterEach(async () => {
      await store.close().catch(() => undefined);
      await schema.drop();
    });

    async function count(sql: string): Promise<number> {
      const { rows } = await withClient(schema.url, (client) => client.query<{ n: string }>(sql));
      return Number(rows[0]?.n);
    }

    it('sends 200 creates, then 200 deletes, made together as a few statements', async () => {
      const ids = Array.from({ length: 200 }, (_, i) => BigInt(i));
      await Promise.all(ids.map((id) => store.createPlant({ id, name: `p${id}` })));
      const creates = statements.filter((name) => name === 'plant-store-create-plants').length;
      expect(creates).toBeGreaterThanOrEqual(1);
      expect(creates).toBeLessThanOrEqual(2);
      expect(await count('SELECT COUNT(*) AS n FROM plants')).toBe(200);

      expect(await Promise.all(ids.map((id) => store.deletePlant(id)))).toEqual(
        ids.map(() => true),
      );
      expect(
        statements.filter((name) => name === 'plant-store-delete-plants').length,
      ).toBeLessThanOrEqual(2);
      expect(await count('SELECT COUNT(*) AS n FROM plants')).toBe(0);
    });

    it('sends 1,500 creates made together in batches of at most 1,000', async () => {
      const ids = Array.from({ length: 1500 }, (_, i) => BigInt(i));
      await Promise.all(ids.map((id) => store.createPlant({ id, name: 'p' })));
      expect(statements.filter((name) => name === 'plant-store-create-plants')).toHaveLength(2);
      expect(await count('SELECT COUNT(*) AS n FROM plants')).toBe(1500);
    });

    it('sends many token look-ups made together as one statement', async () => {
      await store.insertToken({ id: 't1', name: 'one', hash: 'h1', createdAt: new Date() });
      const before = statements.length;
      const found = await Promise.all(
        Array.from({ length: 50 }, () => store.findActiveToken('h1')),
      );
      expect(found.every((record) => record?.id === 't1')).toBe(true);
      expect(statements.slice(before)).toEqual(['plant-store-find-active-tokens']);
    });

    it('never deadlocks two batches of creates, or of deletes, that hold the same ids in opposite orders', async () => {
      const ids = Array.from({ length: 100 }, (_, i) => BigInt(i));
      const reversed = [...ids].reverse();
      const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
      for (let round = 0; round < 10; round++) {
        // Two batches in flight at once, each locking the same rows, one in reverse order.
        const ascending = ids.map((id) => store.createPlant({ id, name: 'a' }));
        await nextTurn();
        const descending = reversed.map((id) => store.createPlant({ id, name: 'd' }));
        const created = await Promise.all([...ascending, ...descending]);
        expect(created.filter((plant) => plant !== undefined)).toHaveLength(100);

        const deletedAscending = ids.map((id) => store.deletePlant(id));
        await nextTurn();
        const deletedDescending = reversed.map((id) => store.deletePlant(id));
        const deleted = await Promise.all([...deletedAscending, ...deletedDescending]);
        expect(deleted.filter(Boolean)).toHaveLength(100);
      }
      expect(await count('SELECT COUNT(*) AS n FROM plants')).toBe(0);
    });

    it('finishes the creates it was given before close() ends the pool', async () => {
      const created = Array.from({ length: 20 }, (_, i) =>
        store.createPlant({ id: BigInt(i), name: 'p' }),
      );
      await store.close();
      expect(await Promise.all(created)).toEqual(created.map(() => ({ name: 'p' })));
      expect(await count('SELECT COUNT(*) AS n FROM plants')).toBe(20);
    });

    it('never answers a look-up made after a revocation committed with the revoked token', async () => {
      await store.insertToken({ id: 't1', name: 'one', hash: 'h1', createdAt: new Date() });
      const other = await openPostgresPlantStore(schema.options);
      // Look-ups keep both batches in flight while another instance revokes the token.
      let revoked = false;
      const seenAfter: (string | undefined)[] = [];
      const lookups: Promise<unknown>[] = [];
      const revocation = other.revokeToken('t1', new Date()).then(() => (revoked = true));
      while (!revoked) {
        const madeAfter = revoked;
        lookups.push(
          store.findActiveToken('h1').then((record) => {
            if (madeAfter) seenAfter.push(record?.id);
          }),
        );
        await new Promise((resolve) => setImmediate(resolve));
      }
      await revocation;
      for (let i = 0; i < 50; i++) {
        lookups.push(store.findActiveToken('h1').then((record) => seenAfter.push(record?.id)));
      }
      await Promise.all(lookups);
      await other.close();
      expect(seenAfter).toEqual(Array.from({ length: 50 }, () => undefined));
    });

    it('fails every call of a batch whose connection is cut as unavailable, storing none, then recovers', async () => {
      const admin = new pg.Client({ connectionString: schema.url });
      await admin.connect();
      // The lock holds the batch's statement in flight until its connection is cut.
      await admin.query('BEGIN');
      await admin.query('LOCK TABLE plants IN ACCESS EXCLUSIVE MODE');
      const calls = Array.from({ length: 10 }, (_, i) =>
        store.createPlant({ id: BigInt(i), name: 'p' }),
      );
      // Another connection: pg_stat_activity stays as it was for the length of a transaction.
      const killer = new pg.Client({ connectionString: schema.url });
      await killer.connect();
      let terminated = 0;
      while (terminated === 0) {
        const { rowCount } = await killer.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
           WHERE application_name = $1 AND wait_event_type = 'Lock' AND query LIKE '%unnest%'`,
          [applicationName],
        );
        terminated = rowCount ?? 0;
      }
      await killer.end();
      await admin.query('ROLLBACK');
      await admin.end();

      const settled = await Promise.allSettled(calls);
      expect(settled.map((result) => result.status === 'rejected' && result.reason.name)).toEqual(
        calls.map(() => 'StoreUnavailableError'),
      );
      expect(await count('SELECT COUNT(*) AS n FROM plants')).toBe(0);
      expect(await store.createPlant({ id: 1n, name: 'after' })).toEqual({ name: 'after' });
    });
  });
});
