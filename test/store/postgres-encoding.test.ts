import { openPostgresPlantStore } from '../../src/store/postgres/postgres-plant-store';
import { createTestSchema, describeWithPostgres, type TestSchema } from '../support/postgres';
import { createTestDatabase, withClient, type TestDatabase } from '../support/postgres-database';

/** Not Latin-1, and outside the Basic Multilingual Plane: what LATIN1 cannot hold. */
const UNICODE_NAME = 'Ἀλόη 🌵 多肉植物';

describeWithPostgres('PostgreSQL store encoding', () => {
  describe.each([
    ['LATIN1', 'which cannot hold every name a client may send'],
    ['SQL_ASCII', 'which stores bytes unchecked'],
  ])('over a database in %s', (encoding, why) => {
    let database: TestDatabase;
    beforeEach(async () => {
      database = await createTestDatabase(
        encoding.toLowerCase(),
        `ENCODING '${encoding}' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`,
      );
    });
    afterEach(async () => {
      // Without FORCE: a connection the failed open left behind would fail the drop.
      await database.drop();
    });

    it('refuses to open, saying how to create a UTF8 database, and creates no table', async () => {
      const refusal = await openPostgresPlantStore(database.options).then(
        // Closed if it opened after all, so that the database can still be dropped.
        async (store) => void (await store.close()),
        (error: unknown) => error,
      );
      expect(refusal).toBeInstanceOf(Error);
      expect((refusal as Error).message).toBe(
        `The PostgreSQL database "${database.name}" has the encoding ${encoding}, ${why}; the plant ` +
          "store needs a UTF8 database. Create one with CREATE DATABASE plants ENCODING 'UTF8' " +
          "TEMPLATE template0 (adding LC_COLLATE and LC_CTYPE 'C', or a UTF-8 locale, if the " +
          "server's default locale is not UTF-8), move any data into it with pg_dump and " +
          'pg_restore, and point DATABASE_URL at it.',
      );
      const tables = await withClient(database.url, (client) =>
        client.query<{ name: string }>(
          `SELECT table_schema || '.' || table_name AS name FROM information_schema.tables
           WHERE table_schema NOT IN ('pg_catalog', 'information_schema')`,
        ),
      );
      expect(tables.rows).toEqual([]);
    });
  });

  describe('over a UTF8 database', () => {
    let schema: TestSchema;
    beforeEach(async () => {
      schema = await createTestSchema();
    });
    afterEach(async () => {
      await schema.drop();
    });

    async function storedName(url: string): Promise<string | undefined> {
      const { rows } = await withClient(url, (client) =>
        client.query<{ name: string }>('SELECT name FROM plants WHERE id = 1'),
      );
      return rows[0]?.name;
    }

    it('opens and stores a name outside Latin-1 exactly', async () => {
      const store = await openPostgresPlantStore(schema.options);
      await store.createPlant({ id: 1n, name: UNICODE_NAME });
      await store.close();
      expect(await storedName(schema.url)).toBe(UNICODE_NAME);
    });

    it('keeps the client encoding UTF8 when the URL asks for another in its options', async () => {
      const url = new URL(schema.url);
      url.searchParams.set(
        'options',
        `${url.searchParams.get('options')} -c client_encoding=LATIN1`,
      );
      const store = await openPostgresPlantStore({ ...schema.options, url: url.toString() });
      await store.createPlant({ id: 1n, name: UNICODE_NAME });
      await store.close();
      expect(await storedName(schema.url)).toBe(UNICODE_NAME);
    });
  });
});
