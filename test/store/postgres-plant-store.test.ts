import pg from 'pg';
import { openPostgresPlantStore } from '../../src/store/postgres/postgres-plant-store';
import { postgresMigrations } from '../../src/store/postgres/migrations';
import { createTestSchema, describeWithPostgres, type TestSchema } from '../support/postgres';
import { describePlantStoreContract } from './plant-store.contract';

describeWithPostgres('PostgreSQL store', () => {
  describePlantStoreContract('PostgreSQL', async () => {
    const schema = await createTestSchema();
    const store = await openPostgresPlantStore(schema.options);
    return {
      store,
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
      const client = new pg.Client({ connectionString: schema.url });
      await client.connect();
      try {
        const { rows } = await client.query<{ version: number }>(
          'SELECT version FROM schema_version ORDER BY version',
        );
        return rows.map((row) => row.version);
      } finally {
        await client.end();
      }
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
      const client = new pg.Client({ connectionString: schema.url });
      await client.connect();
      const { rows } = await client.query<{ id: string; type: string }>(
        'SELECT id::text AS id, pg_typeof(id)::text AS type FROM plants ORDER BY id',
      );
      await client.end();
      expect(rows).toEqual([
        { id: '-9223372036854775808', type: 'bigint' },
        { id: '9007199254740993', type: 'bigint' },
      ]);
      await store.close();
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
});
